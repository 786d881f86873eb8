// The bridge to Polly, which is inside libLLVM-19 but has no C API: run ScopInfo on one
// function of a module and return its SCoPs' domains and access relations as text.
// Text is the only thing that leaves: Polly links its own copy of ISL.
#include "polly/RegisterPasses.h"
#include "polly/ScopInfo.h"
#include "polly/Support/GICHelper.h"
#include "llvm-c/Core.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include <cstdlib>
#include <cstring>
#include <string>

using namespace llvm;

static char *copy_out(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (p)
    std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

extern "C" char *hpvm_polly_analyze(LLVMModuleRef module_ref, const char *function) {
  static bool options_set = false;
  if (!options_set) {
    // Small kernels are "unprofitable" to Polly's optimizer; we only want the analysis.
    // LLVM's value names for parameters and arrays (`N`, `A`), not `p_0`, `MemRef3`.
    const char *argv[] = {"hpvm-mgpu", "--polly-process-unprofitable", "--polly-use-llvm-names"};
    cl::ParseCommandLineOptions(3, argv, "", nullptr, nullptr, true);
    options_set = true;
  }
  Module *M = unwrap(module_ref);
  Function *F = M->getFunction(function);
  if (!F || F->isDeclaration())
    return copy_out(std::string("error\tno function ") + function + "\n");

  PassBuilder PB;
  polly::registerPollyPasses(PB);
  LoopAnalysisManager LAM;
  FunctionAnalysisManager FAM;
  CGSCCAnalysisManager CGAM;
  ModuleAnalysisManager MAM;
  PB.registerModuleAnalyses(MAM);
  PB.registerCGSCCAnalyses(CGAM);
  PB.registerFunctionAnalyses(FAM);
  PB.registerLoopAnalyses(LAM);
  PB.crossRegisterProxies(LAM, FAM, CGAM, MAM);

  std::string out;
  polly::ScopInfo &SI = FAM.getResult<polly::ScopInfoAnalysis>(*F);
  int n = 0;
  for (auto &It : SI) {
    polly::Scop *S = It.second.get();
    if (!S)
      continue;
    out += "scop\t" + std::to_string(n++) + "\t" + polly::stringFromIslObj(S->getContext()) + "\n";
    for (const polly::ScopArrayInfo *A : S->arrays()) {
      const Value *base = A->getBasePtr();
      out += "array\t" + A->getName() + "\t" + (base && base->hasName() ? base->getName().str() : std::string("?")) + "\t" +
             std::to_string(A->getElemSizeInBytes());
      for (unsigned d = 0; d < A->getNumberOfDimensions(); ++d) {
        if (d == 0 && !A->getDimensionSize(0)) {
          out += "\t*";
          continue;
        }
        out += "\t" + polly::stringFromIslObj(A->getDimensionSizePw(d));
      }
      out += "\n";
    }
    for (polly::ScopStmt &Stmt : *S) {
      out += std::string("domain\t") + Stmt.getBaseName() + "\t" + polly::stringFromIslObj(Stmt.getDomain()) + "\n";
      for (polly::MemoryAccess *MA : Stmt) {
        if (!MA->isArrayKind())
          continue;
        const char *kind = MA->isRead() ? "read" : MA->isMustWrite() ? "must-write" : "may-write";
        out += std::string("access\t") + Stmt.getBaseName() + "\t" + kind + "\t" + (MA->isAffine() ? "affine" : "non-affine") + "\t" +
               polly::stringFromIslObj(MA->getAccessRelation()) + "\n";
      }
    }
  }
  if (n == 0)
    out = "error\tno SCoP found in " + std::string(function) + "\n";
  return copy_out(out);
}

extern "C" void hpvm_polly_free(char *text) { std::free(text); }
