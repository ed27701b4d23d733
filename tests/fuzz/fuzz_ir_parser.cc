// IR text as `kplan compile --ir FILE --no-passes` reads it: ir::parse_module, then the verifier
// on what parses (operand counts, attributes, result types re-inferred from the operands through
// ir/infer.cc, dominance, names), then the printer. A module that parses must print to text that
// parses again and prints the same (the printer and parser are each other's inverse).
#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/fuzz/fuzz_support.h"

using namespace kplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::refuse_cleanly([&] {
    const auto module = ir::parse_module(fuzz::as_text(data, size), "fuzz.kir");
    const std::vector<std::string> problems = ir::verify_diagnostics(*module);
    const std::string printed = ir::print_module(*module);
    std::unique_ptr<ir::Module> again;
    try {
      again = ir::parse_module(printed, "printed.kir");
    } catch (const Error& e) {
      fuzz::finding(std::string("the printed module does not parse: ") + e.what() + "\n" + printed);
    }
    if (ir::print_module(*again) != printed) fuzz::finding("print(parse(print(m))) differs from print(m)");
    if (ir::verify_diagnostics(*again).size() != problems.size())
      fuzz::finding("the printed module verifies differently");
  });
  return 0;
}
