// The rocelab command table: one entry per command drives parsing, dispatch and --help.
#pragma once

#include "sys/files.h"

#include <boost/program_options.hpp>
#include <atomic>
#include <functional>
#include <string>
#include <vector>

namespace rocelab::cli {

struct Globals {
  bool verbose = false;
  bool json = false;
};

struct Command {
  std::string name;
  std::string args;     // "SCENARIO", "[NAME]"
  std::string summary;  // one line
  std::string details;  // what it does, paragraphs
  std::string example;
  std::function<void(boost::program_options::options_description&)> options;
  std::function<int(const boost::program_options::variables_map&, const Globals&)> run;
};

const std::vector<Command>& commands();
int main_entry(int argc, char** argv);

// Shared by the commands that run a fabric: SIGINT/SIGTERM/SIGHUP set the flag the run
// polls (it tears down and reports); a progress bar on a terminal, nothing otherwise.
void catch_signals();
const std::atomic<bool>* cancel_flag();
std::function<void(double, const std::string&)> terminal_meter(bool& drew);
// RUN_DIR/report.html written, its path printed; a failure is a warning (the run stands).
// `held`: the directory the run held open (run::RunReport::held), written through, not by name.
void write_report_of(const std::string& run_dir, const std::shared_ptr<sys::HeldDir>& held);

// Options that are a command's positional arguments (shown in its usage line, not listed).
bool positional_option(const std::string& long_name);

// Man pages and bash completion from this table (cli/docs.cc): `rocelab help man [COMMAND]`
// (nullptr: rocelab(1)) and `rocelab completion bash`.
std::string man_page(const Command* c);
std::string bash_completion();
int cmd_completion(const boost::program_options::variables_map& vm, const Globals& g);

// `rocelab sweep ...` (cli/sweep.cc).
void add_sweep_options(boost::program_options::options_description& d);
int cmd_sweep(const boost::program_options::variables_map& vm, const Globals& g);

// `rocelab lab ...` (cli/lab.cc).
void add_lab_options(boost::program_options::options_description& d);
int cmd_lab(const boost::program_options::variables_map& vm, const Globals& g);

// `rocelab import sonic ...`, `rocelab export sonic ...` (cli/sonic.cc).
void add_sonic_options(boost::program_options::options_description& d);
int cmd_import(const boost::program_options::variables_map& vm, const Globals& g);
int cmd_export(const boost::program_options::variables_map& vm, const Globals& g);

// `rocelab plan ...` (cli/plan.cc).
void add_plan_options(boost::program_options::options_description& d);
int cmd_plan(const boost::program_options::variables_map& vm, const Globals& g);
// `rocelab k8s ...` (cli/k8s.cc).
void add_k8s_options(boost::program_options::options_description& d);
int cmd_k8s(const boost::program_options::variables_map& vm, const Globals& g);

}  // namespace rocelab::cli
