// The rocelab command table: one entry per command drives parsing, dispatch and --help.
#pragma once

#include <boost/program_options.hpp>
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

}  // namespace rocelab::cli
