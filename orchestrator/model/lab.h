// Labs: exercises in tuning a RoCE fabric by changing one knob at a time (issue 35). A lab is
// data in the repository, labs/NN-name/{lab.yaml, scenario.yaml}: the brief, the objectives
// (expect: expressions, each with the reason it matters), hints, and the solution as the
// knob changes (--set entries) that turn the starting scenario into one that passes. The
// learner edits their copy of scenario.yaml; `rocelab lab check` runs it with the lab's
// objectives in place of the file's own expect: block, so grading is the run's own
// assertion machinery and cannot be edited away.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/scenario.h"

namespace rocelab::model {

struct LabObjective {
  std::string expr;  // an expect: expression
  std::string name;  // what it asks, in words (default: expr)
  std::string why;   // shown when it fails: what the figure means
  Position pos;      // in lab.yaml
};

// A question graded by the learner's answer (answer.txt in the working directory, or
// `lab check --answer`): which host is misconfigured, say.
struct LabQuestion {
  std::string question;
  std::vector<std::string> accept;  // any of these, compared without case or spaces
  std::string why;                  // shown when the answer is wrong
};

struct Lab {
  int number = 0;     // the NN of its folder: the track's order
  std::string id;     // the folder's name without NN-: lossless-incast
  std::string dir;    // the folder
  std::string title;  // one line
  std::string topic;  // PFC, ECN, DCQCN, buffers, troubleshooting, ...
  std::string level;  // beginner, intermediate, advanced
  int minutes = 5;    // a learner's time, wall clock of its runs included
  std::string situation, task;  // the brief
  std::vector<LabObjective> objectives;
  // Checked at each of these seeds (every objective must hold at all): a fix that works by
  // luck at one draw (which ECMP path, which packet marked) is no fix. Empty: the file's.
  std::vector<uint64_t> seeds;
  std::optional<LabQuestion> question;
  std::vector<std::string> hints;
  std::string solution;                  // the answer and the reasoning, with figures
  std::vector<std::string> solution_set;  // KEY=VALUE entries over scenario.yaml that pass

  std::string folder_name() const;  // NN-id
  std::string start_path() const;   // dir/scenario.yaml
};

struct LabCatalogue {
  std::vector<Lab> labs;            // by number
  std::vector<std::string> errors;  // "file:line: reason", one per problem found
};

// Every ROOT/NN-name/lab.yaml, in number order. A folder that is not a lab (no NN- prefix)
// is skipped; a lab.yaml with errors is reported and left out.
LabCatalogue load_labs(const std::string& root);
// One lab from its folder; errors appended as "file:line: reason".
std::optional<Lab> load_lab(const std::string& dir, std::vector<std::string>& errors);
// By number (3, 03), id (ecn-thresholds) or folder name (03-ecn-thresholds).
const Lab* find_lab(const std::vector<Lab>& labs, std::string_view key);
// Replaces a scenario's expect: block with the lab's objectives (parsed as expect: would);
// the error names the objective and why it does not parse.
std::optional<std::string> apply_objectives(const Lab& lab, Scenario& s);
// The learner's answer against the question: true when it is one of the accepted ones.
bool answer_matches(const LabQuestion& q, std::string_view answer);

}  // namespace rocelab::model
