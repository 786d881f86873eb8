// Grid-stride loops, seen as one iteration per instance (see analysis/src/stride.rs).
//
// `for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)` makes
// instance x run the iterations x, x + S, x + 2S... (S the launch's instances in x) while
// `i < n`. Its step multiplies two run-time values, which no polyhedral model holds. When the
// body depends on the instance only through `i`, iteration j of any instance does exactly what
// iteration 0 of instance j would do, and iteration j runs exactly when `j < n` (the bound is
// loop-invariant and the loop is entered under the same test). So the loop is cut to its
// first iteration here, and the maps Polly then finds, read at every iteration's `j`, give
// the node's accesses: instance x's are the union of those at x + kS (the runtime's job).
//
// Everything below refuses rather than guesses: a loop is rewritten only when every check
// holds, and the caller marks its dimension so the runtime knows the maps are per iteration.

#include "llvm-c/Core.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace llvm;

namespace {

char *copy_text(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (p)
    std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// The value under integer casts (the index's `int`/`size_t` conversions).
const Value *strip(const Value *V) {
  while (auto *C = dyn_cast<CastInst>(V)) {
    if (!isa<TruncInst>(C) && !isa<ZExtInst>(C) && !isa<SExtInst>(C))
      break;
    V = C->getOperand(0);
  }
  return V;
}

// The wrapper's parameters and loops of one grid dimension (what the caller's spec names).
struct Dim {
  unsigned d = 0;
  const Argument *offset = nullptr, *id = nullptr, *size = nullptr, *grid = nullptr;
  const BasicBlock *thread_header = nullptr;
};

bool is_arg(const Value *V, const Argument *A) { return A && strip(V) == A; }

// `a * b` with {a, b} = {x, y} under casts.
bool is_product(const Value *V, const Argument *X, const Argument *Y) {
  auto *M = dyn_cast<BinaryOperator>(strip(V));
  if (!M || M->getOpcode() != Instruction::Mul)
    return false;
  return (is_arg(M->getOperand(0), X) && is_arg(M->getOperand(1), Y)) ||
         (is_arg(M->getOperand(0), Y) && is_arg(M->getOperand(1), X));
}

// The thread loop's counter (a phi of its header).
bool is_thread(const Value *V, const Dim &D) {
  auto *P = dyn_cast<PHINode>(strip(V));
  return P && P->getParent() == D.thread_header;
}

// `block offset + thread` (or `block id * block size + thread`): the global coordinate. Also
// as LLVM's induction-variable pass may leave it: a counter of the thread loop of its own,
// starting at the block offset and stepping by one.
bool is_coordinate(const Value *V, const Dim &D) {
  auto block = [&](const Value *X) { return is_arg(X, D.offset) || is_product(X, D.id, D.size); };
  const Value *S = strip(V);
  if (auto *Q = dyn_cast<PHINode>(S)) {
    if (Q->getParent() != D.thread_header || Q->getNumIncomingValues() != 2)
      return false;
    for (int k = 0; k < 2; k++) {
      auto *Step = dyn_cast<BinaryOperator>(Q->getIncomingValue(1 - k));
      auto *One = Step && Step->getOpcode() == Instruction::Add ? dyn_cast<ConstantInt>(Step->getOperand(1)) : nullptr;
      if (block(Q->getIncomingValue(k)) && Step->getOperand(0) == Q && One && One->isOne())
        return true;
    }
    return false;
  }
  auto *A = dyn_cast<BinaryOperator>(S);
  if (!A || A->getOpcode() != Instruction::Add)
    return false;
  return (block(A->getOperand(0)) && is_thread(A->getOperand(1), D)) ||
         (block(A->getOperand(1)) && is_thread(A->getOperand(0), D));
}

// `i + size * grid`: the step of every thread of the grid.
const Value *grid_step_of(const Value *Next, const PHINode *P, const Dim &D) {
  auto *A = dyn_cast<BinaryOperator>(Next);
  if (!A || A->getOpcode() != Instruction::Add)
    return nullptr;
  for (int k = 0; k < 2; k++)
    if (A->getOperand(k) == P && is_product(A->getOperand(1 - k), D.size, D.grid))
      return A->getOperand(1 - k);
  return nullptr;
}

// `L op R` as a test that holds while the loop goes on (or is entered): `i < n` forms only,
// returned as (value tested, bound, predicate over them); false for any other shape.
bool as_below(const ICmpInst *C, bool holds_when_true, const Value *&Tested, const Value *&Bound,
              CmpInst::Predicate &Pred) {
  CmpInst::Predicate p = holds_when_true ? C->getPredicate() : C->getInversePredicate();
  const Value *L = C->getOperand(0), *R = C->getOperand(1);
  switch (p) {
  case CmpInst::ICMP_SLT:
  case CmpInst::ICMP_ULT:
  case CmpInst::ICMP_SLE:
  case CmpInst::ICMP_ULE:
    break;
  case CmpInst::ICMP_SGT:
  case CmpInst::ICMP_UGT:
  case CmpInst::ICMP_SGE:
  case CmpInst::ICMP_UGE:
    p = CmpInst::getSwappedPredicate(p);
    std::swap(L, R);
    break;
  default:
    return false;
  }
  Tested = L;
  Bound = R;
  Pred = p;
  return true;
}

// Whether two loop bounds are the same value, once extended alike: one value under casts, or
// two constants equal as the test reads them (LLVM widens a test on `i < 96000` to 64 bits).
bool same_bound(const Value *A, const Value *B, bool is_signed) {
  if (strip(A) == strip(B))
    return true;
  auto *CA = dyn_cast<ConstantInt>(A), *CB = dyn_cast<ConstantInt>(B);
  if (!CA || !CB)
    return false;
  return is_signed ? CA->getValue().getSExtValue() == CB->getValue().getSExtValue()
                   : CA->getValue().getZExtValue() == CB->getValue().getZExtValue();
}

bool is_debug_or_marker(const Instruction &I) {
  if (auto *II = dyn_cast<IntrinsicInst>(&I)) {
    switch (II->getIntrinsicID()) {
    case Intrinsic::lifetime_start:
    case Intrinsic::lifetime_end:
    case Intrinsic::assume:
    case Intrinsic::dbg_value:
    case Intrinsic::dbg_declare:
    case Intrinsic::dbg_label:
    case Intrinsic::experimental_noalias_scope_decl:
    case Intrinsic::sideeffect:
    case Intrinsic::pseudoprobe:
    case Intrinsic::invariant_start:
    case Intrinsic::invariant_end:
      return true;
    default:
      return false;
    }
  }
  return false;
}

// Memory the instance owns (a local variable): what it does there is no buffer access.
bool private_memory(const Value *Ptr) { return isa<AllocaInst>(getUnderlyingObject(Ptr, 0)); }

const Value *pointer_of(const Instruction &I) {
  if (auto *Ld = dyn_cast<LoadInst>(&I))
    return Ld->getPointerOperand();
  if (auto *St = dyn_cast<StoreInst>(&I))
    return St->getPointerOperand();
  return nullptr;
}

// Why loop `L` of dimension `D` may not be read per iteration; empty when it may. `G` is the
// block whose branch enters the loop, `P` the loop's counter.
std::string refusal(ArrayRef<const Loop *> Loops, const SmallPtrSetImpl<const Value *> &Counters,
                    const SmallPtrSetImpl<const BasicBlock *> &Guards, const Loop *Body, const Dim &D) {
  auto inside_a_loop = [&](const BasicBlock *B) {
    return std::any_of(Loops.begin(), Loops.end(), [&](const Loop *L) { return L->contains(B); });
  };
  // Values that tell instances apart in this dimension other than through `i`.
  SmallPtrSet<const Value *, 32> tainted;
  SmallVector<const Value *, 64> work;
  for (const Argument *A : {D.offset, D.id})
    if (A)
      work.push_back(A);
  for (const PHINode &Q : D.thread_header->phis())
    work.push_back(&Q);
  while (!work.empty()) {
    const Value *V = work.pop_back_val();
    if (!tainted.insert(V).second)
      continue;
    for (const User *U : V->users())
      if (!Counters.count(U) && isa<Instruction>(U))
        work.push_back(U);
  }
  auto uses_tainted = [&](const Instruction &I) {
    for (const Value *Op : I.operands())
      if (tainted.count(Op))
        return true;
    return false;
  };
  for (const BasicBlock *B : Body->blocks()) {
    bool inside = inside_a_loop(B);
    for (const Instruction &I : *B) {
      if (Counters.count(&I) || is_debug_or_marker(I))
        continue;
      if (auto *CB = dyn_cast<CallBase>(&I)) {
        const Function *Callee = CB->getCalledFunction();
        StringRef name = Callee ? Callee->getName() : "";
        if (name.contains("barrier") || name.contains("syncthreads") || name.contains("bar_sync"))
          return "the threads of a block synchronize";
        // The graph's annotations (`__hpvm__hint`, `__hpvm__attributes`): no memory touched.
        if (name.starts_with("__hpvm__") && !name.contains("atomic"))
          continue;
      }
      if (inside) {
        if (uses_tainted(I))
          return "its body uses the thread's position other than through the loop's counter";
        continue;
      }
      // Outside the loop: no write to a buffer, no read or test that depends on the thread.
      if (I.mayWriteToMemory()) {
        const Value *Ptr = pointer_of(I);
        if (!Ptr || !private_memory(Ptr)) {
          if (std::getenv("HPVM_MGPU_DEBUG_STRIDE"))
            I.print(errs());
          return "the kernel writes memory outside the loop";
        }
        if (uses_tainted(I))
          return "the kernel uses the thread's position outside the loop";
      }
      if (isa<LoadInst>(I) && uses_tainted(I) && !private_memory(pointer_of(I)))
        return "the kernel reads at the thread's position outside the loop";
      if (auto *Br = dyn_cast<BranchInst>(&I)) {
        // The wrapper's own loop and the loop's entry test are the two branches allowed to
        // depend on the thread.
        if (Br->isConditional() && !Guards.count(B) && !(Body->isLoopLatch(B)) && tainted.count(Br->getCondition()))
          return "the loop is entered under another condition on the thread's position";
      }
      if (auto *Sw = dyn_cast<SwitchInst>(&I))
        if (tainted.count(Sw->getCondition()))
          return "the loop is entered under another condition on the thread's position";
    }
  }
  return "";
}

} // namespace

// Finds the grid-stride loops of `function` (a wrapper of hpvm-mgpu's analysis) and cuts each
// to its first iteration, all or none. `spec` has one line per grid dimension whose block size
// is known only at the launch: `dim offset id size grid thread-loop-header`, tab-separated
// (wrapper parameter and block names). Returns `strided\tDIM\n` when the loops were rewritten,
// `refused\tDIM\tWHY\tLOC\n` per reason they were left as they are, nothing else.
extern "C" char *hpvm_grid_stride(LLVMModuleRef module_ref, const char *function, const char *spec) {
  Module *M = unwrap(module_ref);
  Function *F = M->getFunction(function);
  if (!F || F->isDeclaration())
    return copy_text("");
  auto arg = [&](StringRef name) -> const Argument * {
    for (const Argument &A : F->args())
      if (A.getName() == name)
        return &A;
    return nullptr;
  };
  SmallVector<Dim, 3> dims;
  StringRef rest(spec);
  while (!rest.empty()) {
    auto [line, after] = rest.split('\n');
    rest = after;
    SmallVector<StringRef, 6> f;
    line.split(f, '\t');
    if (f.size() != 6)
      continue;
    Dim D;
    if (f[0].getAsInteger(10, D.d))
      continue;
    D.offset = arg(f[1]);
    D.id = arg(f[2]);
    D.size = arg(f[3]);
    D.grid = arg(f[4]);
    for (const BasicBlock &B : *F)
      if (B.getName() == f[5])
        D.thread_header = &B;
    if (D.size && D.grid && D.thread_header && (D.offset || D.id))
      dims.push_back(D);
  }
  if (dims.empty())
    return copy_text("");

  DominatorTree DT(*F);
  LoopInfo LI(DT);
  std::string out;
  // The grid-stride loops: each with its counters (LLVM may keep the counter twice, at two
  // widths), in one dimension.
  struct Candidate {
    Loop *L;
    SmallVector<PHINode *, 2> counters;
    unsigned d;
  };
  SmallVector<Candidate, 2> found;
  bool mixed = false;
  for (Loop *L : LI.getLoopsInPreorder()) {
    if (L->getHeader()->getName().starts_with("hpvm.instance."))
      continue;
    BasicBlock *Latch = L->getLoopLatch();
    BasicBlock *Pre = L->getLoopPreheader();
    if (!Latch || !Pre)
      continue;
    for (PHINode &P : L->getHeader()->phis()) {
      if (!P.getType()->isIntegerTy() || P.getNumIncomingValues() != 2)
        continue;
      if (std::getenv("HPVM_MGPU_DEBUG_STRIDE")) {
        errs() << "grid-stride candidate in " << F->getName() << ": ";
        P.print(errs());
        errs() << "\n  next: ";
        P.getIncomingValueForBlock(Latch)->print(errs());
        errs() << "\n  start: ";
        P.getIncomingValueForBlock(Pre)->print(errs());
        errs() << "\n";
      }
      for (const Dim &D : dims) {
        if (!grid_step_of(P.getIncomingValueForBlock(Latch), &P, D) || !is_coordinate(P.getIncomingValueForBlock(Pre), D))
          continue;
        auto at = std::find_if(found.begin(), found.end(), [&](const Candidate &c) { return c.L == L; });
        if (at == found.end())
          found.push_back({L, {&P}, D.d});
        else
          at->counters.push_back(&P);
        mixed |= found.front().d != D.d;
      }
    }
  }
  if (found.empty())
    return copy_text(out);
  const Dim &D = *std::find_if(dims.begin(), dims.end(), [&](const Dim &x) { return x.d == found.front().d; });
  SmallPtrSet<const Value *, 8> counters;
  SmallPtrSet<const BasicBlock *, 8> guards;
  SmallVector<const Loop *, 2> loops;
  SmallVector<BranchInst *, 2> latches;
  bool refused = false;
  for (const Candidate &C : found) {
    Loop *L = C.L;
    BasicBlock *Header = L->getHeader(), *Latch = L->getLoopLatch(), *Pre = L->getLoopPreheader();
    auto refuse = [&](const std::string &why) {
      refused = true;
      out += "refused\t" + std::to_string(D.d) + "\t" + why + "\t";
      const DILocation *Loc = Latch->getTerminator()->getDebugLoc().get();
      out += Loc ? Loc->getFilename().str() + ":" + std::to_string(Loc->getLine()) : std::string("?");
      out += "\n";
    };
    Loop *Body = L->getParentLoop();
    if (mixed) {
      refuse("the kernel has grid-stride loops in two dimensions");
      continue;
    }
    if (!Body || !Body->getHeader()->getName().starts_with("hpvm.instance.") || Body != found.front().L->getParentLoop()) {
      refuse("the grid-stride loop is inside another loop");
      continue;
    }
    if (L->getExitingBlock() != Latch) {
      refuse("the loop may be left before its test (a `break` or `return` inside)");
      continue;
    }
    auto *Br = dyn_cast<BranchInst>(Latch->getTerminator());
    auto *Cmp = Br && Br->isConditional() ? dyn_cast<ICmpInst>(Br->getCondition()) : nullptr;
    const Value *Tested = nullptr, *Bound = nullptr;
    CmpInst::Predicate Pred;
    // The counter the loop tests.
    const PHINode *P = nullptr;
    if (Cmp && as_below(Cmp, Br->getSuccessor(0) == Header, Tested, Bound, Pred) && L->isLoopInvariant(Bound))
      for (const PHINode *Q : C.counters)
        if (strip(Tested) == strip(Q->getIncomingValueForBlock(Latch)))
          P = Q;
    if (!P) {
      refuse("the loop's test is not `i < bound` with a bound the loop does not change");
      continue;
    }
    const Value *Start = P->getIncomingValueForBlock(Pre);
    // The loop is entered under the same test on its first value (a rotated `for` loop).
    BasicBlock *G = Pre->getSinglePredecessor();
    auto *GBr = G ? dyn_cast<BranchInst>(G->getTerminator()) : nullptr;
    auto *GCmp = GBr && GBr->isConditional() ? dyn_cast<ICmpInst>(GBr->getCondition()) : nullptr;
    const Value *GTested = nullptr, *GBound = nullptr;
    CmpInst::Predicate GPred;
    bool same_test = GCmp && as_below(GCmp, GBr->getSuccessor(0) == Pre, GTested, GBound, GPred) && GPred == Pred &&
                     (strip(GTested) == strip(Start) || (is_coordinate(GTested, D) && is_coordinate(Start, D))) &&
                     same_bound(GBound, Bound, CmpInst::isSigned(Pred));
    if (same_test && GTested->getType() != Tested->getType()) {
      // LLVM widened the counter: the same test on extended values, which keeps the order
      // only when extended alike (sign-extension for a signed test, zero- for unsigned).
      bool guard_wide = GTested->getType()->getIntegerBitWidth() > Tested->getType()->getIntegerBitWidth();
      const Value *bound = guard_wide ? GBound : Bound, *start = guard_wide ? GTested : Start;
      bool bound_ok = isa<ConstantInt>(bound) || (CmpInst::isSigned(Pred) ? isa<SExtInst>(bound) : isa<ZExtInst>(bound));
      same_test = bound_ok && (CmpInst::isSigned(Pred) ? isa<SExtInst>(start) : isa<ZExtInst>(start));
    }
    if (!same_test) {
      refuse("the loop is not entered under its own test");
      continue;
    }
    counters.insert(C.counters.begin(), C.counters.end());
    guards.insert(G);
    loops.push_back(L);
    latches.push_back(Br);
  }
  if (refused)
    return copy_text(out);
  std::string why = refusal(loops, counters, guards, found.front().L->getParentLoop(), D);
  if (!why.empty()) {
    const DILocation *Loc = found.front().L->getLoopLatch()->getTerminator()->getDebugLoc().get();
    out += "refused\t" + std::to_string(D.d) + "\t" + why + "\t" +
           (Loc ? Loc->getFilename().str() + ":" + std::to_string(Loc->getLine()) : std::string("?")) + "\n";
    return copy_text(out);
  }
  // One iteration each: the back edge goes to the exit; the header's values become their first.
  for (size_t k = 0; k < loops.size(); k++) {
    BranchInst *Br = latches[k];
    BasicBlock *Header = loops[k]->getHeader(), *Latch = Br->getParent();
    BasicBlock *Exit = Br->getSuccessor(0) == Header ? Br->getSuccessor(1) : Br->getSuccessor(0);
    Header->removePredecessor(Latch);
    BranchInst::Create(Exit, Br);
    Br->eraseFromParent();
  }
  out += "strided\t" + std::to_string(D.d) + "\n";
  return copy_text(out);
}

extern "C" void hpvm_grid_stride_free(char *text) { std::free(text); }
