#include "cli/commands.h"

int main(int argc, char** argv) { return rocelab::cli::main_entry(argc, argv); }
