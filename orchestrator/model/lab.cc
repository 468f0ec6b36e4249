#include "model/lab.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/expect.h"

namespace rocelab::model {

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxLabFile = 256 * 1024;  // a brief and its objectives, with room to spare

// The NN of an NN-name folder, or 0 when the name is not of that shape.
int number_of(const std::string& folder) {
  size_t i = 0;
  while (i < folder.size() && i < 3 && std::isdigit(static_cast<unsigned char>(folder[i]))) ++i;
  if (i == 0 || i >= folder.size() || folder[i] != '-' || i + 1 == folder.size()) return 0;
  return std::stoi(folder.substr(0, i));
}

// Reads lab.yaml's keys strictly: an unknown key or a wrong shape is an error with its line.
class LabReader {
 public:
  LabReader(std::string file, std::vector<std::string>& errors) : file_(std::move(file)), errors_(errors) {}

  bool read(const YAML::Node& root, Lab& lab) {
    if (!root.IsMap()) return error(root, "a lab file is a map (title:, objectives:, ...)");
    const size_t before = errors_.size();
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "title") text(v, key, lab.title);
      else if (key == "topic") text(v, key, lab.topic);
      else if (key == "level") {
        if (text(v, key, lab.level) && lab.level != "beginner" && lab.level != "intermediate" && lab.level != "advanced")
          error(v, "level: '" + lab.level + "' is not beginner, intermediate or advanced");
      } else if (key == "minutes") {
        if (!v.IsScalar() || !number(v.Scalar(), 1, 120, lab.minutes)) error(v, "minutes: a whole number from 1 to 120");
      } else if (key == "situation") text(v, key, lab.situation);
      else if (key == "task") text(v, key, lab.task);
      else if (key == "objectives") objectives(v, lab.objectives);
      else if (key == "seeds") seeds(v, lab.seeds);
      else if (key == "question") question(v, lab);
      else if (key == "hints") list(v, key, lab.hints);
      else if (key == "solution") solution(v, lab);
      else error(kv.first, "unknown key '" + key +
                               "' (title, topic, level, minutes, situation, task, objectives, seeds, question, hints, "
                               "solution)");
    }
    for (const char* must : {"title", "topic", "level", "situation", "task", "objectives", "hints", "solution"})
      if (!root[must]) error(root, std::string("missing '") + must + "'");
    return errors_.size() == before;
  }

 private:
  bool error(const YAML::Node& at, const std::string& why) {
    const int line = at.Mark().is_null() ? 1 : at.Mark().line + 1;
    errors_.push_back(file_ + ":" + std::to_string(line) + ": " + why);
    return false;
  }

  static bool number(const std::string& s, int lo, int hi, int& out) {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    const int n = std::stoi(s);
    if (n < lo || n > hi) return false;
    out = n;
    return true;
  }

  bool text(const YAML::Node& v, const std::string& key, std::string& out) {
    if (!v.IsScalar() || v.Scalar().empty()) return error(v, key + ": a non-empty text");
    out = v.Scalar();
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return true;
  }

  void list(const YAML::Node& v, const std::string& key, std::vector<std::string>& out) {
    if (!v.IsSequence() || v.size() == 0) {
      error(v, key + ": a list of texts, at least one");
      return;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      std::string s;
      if (text(v[i], key + "[" + std::to_string(i) + "]", s)) out.push_back(std::move(s));
    }
  }

  void objectives(const YAML::Node& v, std::vector<LabObjective>& out) {
    if (!v.IsSequence() || v.size() == 0) {
      error(v, "objectives: a list of {expect: EXPRESSION, why: TEXT}, at least one");
      return;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      const YAML::Node& o = v[i];
      const std::string at = "objectives[" + std::to_string(i) + "]";
      if (!o.IsMap() || !o["expect"] || !o["why"]) {
        error(o, at + ": a map with expect: (an expect: expression) and why: (what the figure means)");
        continue;
      }
      LabObjective obj;
      obj.pos = Position{o["expect"].Mark().line + 1, o["expect"].Mark().column + 1};
      bool ok = text(o["expect"], at + ".expect", obj.expr) && text(o["why"], at + ".why", obj.why);
      if (o["name"]) ok = text(o["name"], at + ".name", obj.name) && ok;
      for (const auto& kv : o)
        if (const auto k = kv.first.as<std::string>(); k != "expect" && k != "why" && k != "name")
          ok = error(kv.first, at + ": unknown key '" + k + "' (expect, name, why)");
      if (!ok) continue;
      if (auto p = parse_expression(obj.expr); p.error) {
        error(o["expect"], at + ".expect: " + p.error->message);
        continue;
      }
      if (obj.name.empty()) obj.name = obj.expr;
      out.push_back(std::move(obj));
    }
  }

  void seeds(const YAML::Node& v, std::vector<uint64_t>& out) {
    int n = 0;
    if (!v.IsSequence() || v.size() == 0 || v.size() > 10) {
      error(v, "seeds: a list of 1 to 10 seeds");
      return;
    }
    for (const auto& s : v)
      if (!s.IsScalar() || !number(s.Scalar(), 0, 999999, n)) error(s, "seeds: a seed is a whole number from 0 to 999999");
      else out.push_back(uint64_t(n));
  }

  void question(const YAML::Node& v, Lab& lab) {
    if (!v.IsMap() || !v["ask"] || !v["accept"] || !v["why"]) {
      error(v, "question: a map with ask: (the question), accept: (the answers that count) and why:");
      return;
    }
    LabQuestion q;
    bool ok = text(v["ask"], "question.ask", q.question) && text(v["why"], "question.why", q.why);
    list(v["accept"], "question.accept", q.accept);
    for (const auto& kv : v)
      if (const auto k = kv.first.as<std::string>(); k != "ask" && k != "accept" && k != "why")
        ok = error(kv.first, "question: unknown key '" + k + "' (ask, accept, why)");
    if (ok && !q.accept.empty()) lab.question = std::move(q);
  }

  void solution(const YAML::Node& v, Lab& lab) {
    if (!v.IsMap() || !v["explain"] || !v["set"]) {
      error(v, "solution: a map with explain: (the answer and the reasoning) and set: (KEY=VALUE changes that pass)");
      return;
    }
    text(v["explain"], "solution.explain", lab.solution);
    list(v["set"], "solution.set", lab.solution_set);
    for (const auto& s : lab.solution_set)
      if (s.find('=') == std::string::npos || s.front() == '=') error(v["set"], "solution.set: '" + s + "' is not KEY=VALUE");
    for (const auto& kv : v)
      if (const auto k = kv.first.as<std::string>(); k != "explain" && k != "set")
        error(kv.first, "solution: unknown key '" + k + "' (explain, set)");
  }

  std::string file_;
  std::vector<std::string>& errors_;
};

std::string squeeze(std::string_view s) {
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string Lab::folder_name() const {
  char nn[8];
  std::snprintf(nn, sizeof nn, "%02d", number);
  return std::string(nn) + "-" + id;
}

std::string Lab::start_path() const { return (fs::path(dir) / "scenario.yaml").string(); }

std::optional<Lab> load_lab(const std::string& dir, std::vector<std::string>& errors) {
  const fs::path folder(dir);
  const std::string name = folder.filename().string();
  const std::string file = (folder / "lab.yaml").string();
  Lab lab;
  lab.number = number_of(name);
  if (lab.number == 0) {
    errors.push_back(dir + ": a lab's folder is named NN-name (01-lossless-incast)");
    return std::nullopt;
  }
  lab.id = name.substr(name.find('-') + 1);
  lab.dir = dir;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec) || fs::file_size(file, ec) > kMaxLabFile) {
    errors.push_back(file + ": missing, not a regular file, or larger than 256 KiB");
    return std::nullopt;
  }
  if (!fs::is_regular_file(lab.start_path(), ec)) {
    errors.push_back(lab.start_path() + ": missing (the lab's starting scenario)");
    return std::nullopt;
  }
  YAML::Node root;
  try {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    errors.push_back(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
    return std::nullopt;
  }
  LabReader r(file, errors);
  if (!r.read(root, lab)) return std::nullopt;
  return lab;
}

LabCatalogue load_labs(const std::string& root) {
  LabCatalogue c;
  std::error_code ec;
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory(ec) && number_of(e.path().filename().string()) > 0) folders.push_back(e.path());
  if (ec) c.errors.push_back(root + ": " + ec.message());
  std::sort(folders.begin(), folders.end());
  for (const auto& f : folders)
    if (auto lab = load_lab(f.string(), c.errors)) {
      const bool taken = std::any_of(c.labs.begin(), c.labs.end(), [&](const Lab& l) { return l.number == lab->number; });
      if (taken) c.errors.push_back(f.string() + ": number " + std::to_string(lab->number) + " is taken by another lab");
      else c.labs.push_back(std::move(*lab));
    }
  std::sort(c.labs.begin(), c.labs.end(), [](const Lab& a, const Lab& b) { return a.number < b.number; });
  return c;
}

const Lab* find_lab(const std::vector<Lab>& labs, std::string_view key) {
  for (const auto& l : labs) {
    if (key == l.id || key == l.folder_name()) return &l;
    if (!key.empty() && key.size() <= 3 && key.find_first_not_of("0123456789") == std::string_view::npos &&
        std::stoi(std::string(key)) == l.number)
      return &l;
  }
  return nullptr;
}

std::optional<std::string> apply_objectives(const Lab& lab, Scenario& s) {
  s.expect.clear();
  for (const auto& o : lab.objectives) {
    auto parsed = parse_expression(o.expr);
    if (parsed.error) return "objective '" + o.name + "': " + parsed.error->message;
    Expectation e;
    e.text = o.expr;
    e.name = o.name;
    e.pos = o.pos;
    e.expr = std::move(parsed.root);
    s.expect.push_back(std::move(e));
  }
  return std::nullopt;
}

bool answer_matches(const LabQuestion& q, std::string_view answer) {
  const std::string a = squeeze(answer);
  return !a.empty() && std::any_of(q.accept.begin(), q.accept.end(), [&](const std::string& x) { return squeeze(x) == a; });
}

}  // namespace rocelab::model
