// The bridge to Polly, which is inside libLLVM-19 but has no C API: run ScopInfo on one
// function of a module and return its SCoPs' domains and access relations as text.
// Text is the only thing that leaves: Polly links its own copy of ISL.
#include "polly/RegisterPasses.h"
#include "polly/ScopDetection.h"
#include "polly/ScopInfo.h"
#include "llvm/Analysis/RegionInfo.h"
#include "polly/Support/GICHelper.h"
#include "llvm-c/Core.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/Utils/UnifyLoopExits.h"
#include "llvm/Transforms/Utils/Local.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Support/CommandLine.h"
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace llvm;

static char *copy_out(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (p)
    std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// Whether a file is the compiler's or the system's header (hpvm_core::loc::is_system_header).
static bool system_header(StringRef f) {
  return f.contains("/lib/clang/") || f.starts_with("/usr/include/") || f.contains("/hpvm-mgpu/cuda-");
}

// `file:line` of an instruction, `?` without debug info. Code inlined from a system header
// (CUDA's `expf`, `atomicAdd`) is reported where the user's code called it.
static std::string where(const Instruction *I) {
  if (!I)
    return "?";
  const DILocation *L = I->getDebugLoc().get();
  if (!L)
    return "?";
  const DILocation *first = L;
  while (L && system_header(L->getFilename()))
    L = L->getInlinedAt();
  if (!L)
    L = first;
  return L->getFilename().str() + ":" + std::to_string(L->getLine());
}

// The name of the object a pointer is based on (a parameter of the analysed function), `?`.
static std::string base_name(const Value *P) {
  const Value *B = getUnderlyingObject(P, 0);
  return B && B->hasName() ? B->getName().str() : std::string("?");
}

// Why an access no SCoP models is beyond the model: `atomic` (an atomic update), `data`
// (its address depends on a value loaded from memory or returned by a call: a data-dependent
// index) or `shape`
// (anything else Polly could not express, such as a non-affine index).
static const char *why_unmodeled(const Instruction &I, const Value *P) {
  if (isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I))
    return "atomic";
  SmallVector<const Value *, 16> work{P};
  SmallPtrSet<const Value *, 32> seen;
  while (!work.empty()) {
    const Value *V = work.pop_back_val();
    if (!seen.insert(V).second || seen.size() > 256)
      continue;
    // A call's result is as unknown as a loaded value (a warp shuffle, a clock read).
    if (isa<LoadInst>(V) || isa<CallBase>(V))
      return "data";
    if (auto *U = dyn_cast<Instruction>(V))
      if (isa<GetElementPtrInst>(U) || isa<CastInst>(U) || isa<BinaryOperator>(U) || isa<SelectInst>(U) || isa<CmpInst>(U) ||
          isa<PHINode>(U))
        for (const Value *Op : U->operands())
          work.push_back(Op);
  }
  return "shape";
}

static std::string type_name(Type *T) {
  std::string s;
  raw_string_ostream os(s);
  T->print(os);
  return os.str();
}

// The loops of a statement, outermost first, by their header's name.
static std::string loops_of(polly::ScopStmt &Stmt) {
  std::string out;
  for (unsigned d = 0; d < Stmt.getNumIterators(); ++d) {
    const Loop *L = Stmt.getLoopForDimension(d);
    out += (d ? "," : "") + (L && L->getHeader()->hasName() ? L->getHeader()->getName().str() : std::string("?"));
  }
  return out.empty() ? "-" : out;
}

// For a write at a data-dependent index, when that index is a value the statement loads at a
// place Polly models exactly (`y[perm[i]]`, also `y[perm[i] + 1]`): a line giving that load's
// relation and how its value becomes the element index, so that the runtime can read the
// indices (an inspector); `through-later` when the load's place is not affine. Empty when the
// write is of any other shape.
static std::string through(polly::ScopStmt &Stmt, polly::MemoryAccess *MA) {
  auto *St = dyn_cast_or_null<StoreInst>(MA->getAccessInstruction());
  if (!St)
    return "";
  auto *G = dyn_cast<GetElementPtrInst>(St->getPointerOperand());
  if (!G || G->getNumIndices() != 1 || G->getPointerOperand() != MA->getOriginalBaseAddr())
    return "";
  uint64_t scale = St->getModule()->getDataLayout().getTypeAllocSize(G->getSourceElementType());
  Value *I = G->getOperand(1);
  int64_t offset = 0;
  const char *ext = "none";
  // `add nsw x, C` commutes with the extensions (an overflow would be undefined behaviour).
  for (int step = 0; step < 4; ++step) {
    if (auto *B = dyn_cast<BinaryOperator>(I)) {
      auto *C = dyn_cast<ConstantInt>(B->getOperand(1));
      if (B->getOpcode() == Instruction::Add && B->hasNoSignedWrap() && C && C->getBitWidth() <= 64) {
        offset += C->getSExtValue();
        I = B->getOperand(0);
        continue;
      }
      return "";
    }
    if ((isa<SExtInst>(I) || isa<ZExtInst>(I)) && std::string(ext) == "none") {
      ext = isa<SExtInst>(I) ? "sext" : "zext";
      I = cast<CastInst>(I)->getOperand(0);
      continue;
    }
    break;
  }
  auto *L = dyn_cast<LoadInst>(I);
  if (!L || !L->getType()->isIntegerTy())
    return "";
  polly::MemoryAccess *LA = Stmt.getArrayAccessOrNULLFor(L);
  if (!LA || !LA->isRead() || !LA->isArrayKind())
    return "";
  // The indices are loaded at a place Polly sees but cannot express (`perm[b * n + i]`, a
  // block id times a scalar): with a launch's values built in it may become this shape. Not
  // where that place is itself loaded (`pos[perm[i]]`): no value makes it affine.
  if (!LA->isAffine())
    return std::string(why_unmodeled(*L, L->getPointerOperand())) == "data" ? "" : "through-later\n";
  return "through\t" + polly::stringFromIslObj(LA->getAccessRelation()) + "\t" + ext + "\t" +
         std::to_string(L->getType()->getIntegerBitWidth()) + "\t" + std::to_string(scale) + "\t" +
         std::to_string(offset) + "\n";
}


// A polynomial over a SCoP's plain parameters: each monomial's parameter names (sorted,
// repeated for powers) and its coefficient.
using Poly = std::map<std::vector<std::string>, __int128>;

// `S` as a polynomial over the SCoP's parameters that are plain values, with `conds` the
// conditions (ISL constraints) under which the SCEV's fixed-width arithmetic computes it
// without wrapping; false when `S` is not of that form (a max, a division, a value that is
// no parameter, coefficients beyond 64 bits).
static bool expand(const SCEV *S, polly::Scop &scop, Poly &out, std::vector<std::string> &conds, int depth = 0) {
  if (depth > 12)
    return false;
  if (auto *C = dyn_cast<SCEVConstant>(S)) {
    if (C->getAPInt().getSignificantBits() > 64)
      return false;
    out = {{{}, C->getAPInt().getSExtValue()}};
    return true;
  }
  if (auto *U = dyn_cast<SCEVUnknown>(S)) {
    isl::id id = scop.getIdForParam(U);
    // A parameter of the analysed function that Polly met only inside a product
    // (`blockDim.x * gridDim.x`: the grid's size is no parameter of its own) is the value the
    // runtime passes under that argument's name.
    auto *arg = dyn_cast<Argument>(U->getValue());
    if (id.is_null() && arg && arg->hasName() && arg->getType()->isIntegerTy(64)) {
      out = {{{arg->getName().str()}, 1}};
      return true;
    }
    if (id.is_null())
      return false;
    out = {{{id.get_name()}, 1}};
    return true;
  }
  if (auto *A = dyn_cast<SCEVAddExpr>(S)) {
    out.clear();
    for (const SCEV *Op : A->operands()) {
      Poly p;
      if (!expand(Op, scop, p, conds, depth + 1))
        return false;
      for (auto &[m, c] : p)
        out[m] += c;
    }
  } else if (auto *M = dyn_cast<SCEVMulExpr>(S)) {
    out = {{{}, 1}};
    for (const SCEV *Op : M->operands()) {
      Poly p, r;
      if (!expand(Op, scop, p, conds, depth + 1))
        return false;
      for (auto &[ma, ca] : out)
        for (auto &[mb, cb] : p) {
          std::vector<std::string> m = ma;
          m.insert(m.end(), mb.begin(), mb.end());
          std::sort(m.begin(), m.end());
          r[m] += ca * cb;
        }
      out = r;
    }
  } else if (auto *X = dyn_cast<SCEVIntegralCastExpr>(S)) {
    // An extension is the value itself while the narrow arithmetic does not wrap: the
    // condition is kept, affine, for whoever uses the expansion to check.
    bool sext = isa<SCEVSignExtendExpr>(X);
    if (!sext && !isa<SCEVZeroExtendExpr>(X))
      return false;
    const SCEV *Op = X->getOperand();
    if (!expand(Op, scop, out, conds, depth + 1))
      return false;
    unsigned bits = Op->getType()->getIntegerBitWidth();
    if (bits > 62)
      return false;
    std::string affine;
    for (auto &[m, c] : out) {
      if (m.size() > 1)
        return false;
      if (c == 0)
        continue;
      affine += (affine.empty() ? "" : " + ") + std::to_string((long long)c) + (m.empty() ? "" : "*" + m[0]);
    }
    bool plain = out.size() == 1 && out.begin()->first.size() == 1 && out.begin()->second == 1;
    if (affine.empty())
      affine = "0";
    long long lo = sext ? -(1LL << (bits - 1)) : 0, hi = sext ? (1LL << (bits - 1)) - 1 : (1LL << bits) - 1;
    // A plain parameter is already taken by Polly as its signed value.
    if (!(plain && sext))
      conds.push_back(std::to_string(lo) + " <= " + affine + " <= " + std::to_string(hi));
  } else {
    return false;
  }
  for (auto it = out.begin(); it != out.end();)
    it = it->second == 0 ? out.erase(it) : std::next(it);
  for (auto &[m, c] : out)
    if (c > INT64_MAX || c < INT64_MIN)
      return false;
  return true;
}

// For each parameter of the SCoP that is not a plain value but a product (Polly names those
// `p_N`, e.g. `(-r) * (1 + w)` where a loop from `-r` indexes `in[(y + j) * w + x + i]`):
// `param\tNAME\tPOLY\tCONDS`, its expansion over plain parameters (`c*a*b + c*a + c`) and the
// conditions (`;`-separated) under which it holds. Delinearization leaves such a parameter
// whole in the innermost subscript; with the expansion the analysis moves each part to the
// subscript it belongs to.
static std::string compound_params(polly::Scop &scop) {
  std::string out;
  for (const SCEV *P : scop.parameters()) {
    if (isa<SCEVUnknown>(P))
      continue;
    isl::id id = scop.getIdForParam(P);
    if (id.is_null())
      continue;
    Poly poly;
    std::vector<std::string> conds;
    if (!expand(P, scop, poly, conds))
      continue;
    std::string text;
    for (auto &[m, c] : poly) {
      text += (text.empty() ? "" : " + ") + std::to_string((long long)c);
      for (auto &a : m)
        text += "*" + a;
    }
    std::string cs;
    for (auto &c : conds)
      cs += (cs.empty() ? "" : ";") + c;
    out += "param\t" + id.get_name() + "\t" + (text.empty() ? "0" : text) + "\t" + (cs.empty() ? "-" : cs) + "\n";
  }
  return out;
}

// `c` as a condition Polly accepts at a loop's exit: an `icmp` or a constant, or `and`/`or` of
// such. Anything else (an `fcmp`, a short-circuit `phi` or `select`, a loaded flag) becomes
// `icmp ne (zext c), 0`, inserted before `at`.
static Value *as_icmp(Value *c, Instruction *at) {
  if (isa<ICmpInst>(c) || isa<ConstantInt>(c))
    return c;
  if (auto *op = dyn_cast<BinaryOperator>(c))
    if (op->getOpcode() == Instruction::And || op->getOpcode() == Instruction::Or) {
      Value *a = as_icmp(op->getOperand(0), at), *b = as_icmp(op->getOperand(1), at);
      if (a == op->getOperand(0) && b == op->getOperand(1))
        return c;
      return BinaryOperator::Create(op->getOpcode(), a, b, "hpvm.exit", at);
    }
  auto *z = new ZExtInst(c, Type::getInt32Ty(c->getContext()), "hpvm.exit", at);
  return new ICmpInst(at, ICmpInst::ICMP_NE, z, ConstantInt::get(z->getType(), 0), "hpvm.exit");
}

// Loops whose exit depends on the data (`while (x * x + y * y < 4.0f)`, a search that
// `break`s) have no trip count Polly can model; it can still over-approximate such a loop as
// one statement (`--polly-allow-nonaffine-loops`), keeping the code around it exact, but its
// detection dismisses the whole region instead when a loop has several exit blocks, or when
// a loop's exit condition is not an `icmp` (it logs that as an error before it considers
// boxing the loop). So every loop gets one exit block (LLVM's UnifyLoopExits), and each
// exit condition of another kind is put as an `icmp`, which Polly finds non-affine and boxes.
// Whether `v` depends on memory or floating point: a value no affine model holds.
static bool data_dependent(Value *v, SmallPtrSetImpl<Value *> &seen) {
  auto *I = dyn_cast<Instruction>(v);
  if (!I || !seen.insert(I).second)
    return false;
  if (isa<LoadInst>(I) || isa<FCmpInst>(I) || isa<CallBase>(I))
    return true;
  // A choice among constants (clang's cleanup slot: which `break` or `return` left a scope)
  // is as data-dependent as the branches that chose its way in.
  if (auto *Phi = dyn_cast<PHINode>(I);
      Phi && std::all_of(Phi->incoming_values().begin(), Phi->incoming_values().end(),
                         [](Value *x) { return isa<Constant>(x); }))
    for (BasicBlock *In : Phi->blocks()) {
      SmallVector<BasicBlock *, 4> deciders(predecessors(In));
      deciders.push_back(In);
      for (BasicBlock *P : deciders)
        if (auto *BI = dyn_cast<BranchInst>(P->getTerminator()); BI && BI->isConditional())
          if (data_dependent(BI->getCondition(), seen))
            return true;
    }
  for (Value *op : I->operands())
    if (data_dependent(op, seen))
      return true;
  return false;
}

// Whether every value `L` computes is used outside it only as a value stored (through the
// phis of its exits): then running more iterations changes no address, condition or bound
// after the loop, only data, which the analysis does not look at.
static bool only_data_escapes(Loop *L) {
  std::vector<Instruction *> work;
  for (BasicBlock *BB : L->blocks())
    for (Instruction &I : *BB)
      work.push_back(&I);
  SmallPtrSet<Instruction *, 32> seen;
  while (!work.empty()) {
    Instruction *I = work.back();
    work.pop_back();
    if (!seen.insert(I).second)
      continue;
    for (User *U : I->users()) {
      auto *UI = dyn_cast<Instruction>(U);
      if (!UI)
        return false;
      if (L->contains(UI))
        continue;
      if (auto *St = dyn_cast<StoreInst>(UI); St && St->getValueOperand() == I && St->getPointerOperand() != I)
        continue;
      if (isa<PHINode>(UI)) {
        work.push_back(UI);
        continue;
      }
      return false;
    }
  }
  return true;
}

// Whether taking away the `data` exits (each terminator kept to its one successor) leaves a
// block that writes memory unreachable: a write only the data-dependent exit leads to (after
// jump threading, `if (found) out[i] = k;` behind a search) would vanish from the maps.
static bool loses_writes(Function &F, const std::vector<std::pair<Instruction *, BasicBlock *>> &data) {
  auto reach = [&](bool cut) {
    SmallPtrSet<BasicBlock *, 32> seen;
    std::vector<BasicBlock *> work{&F.getEntryBlock()};
    while (!work.empty()) {
      BasicBlock *BB = work.back();
      work.pop_back();
      if (!seen.insert(BB).second)
        continue;
      auto d = std::find_if(data.begin(), data.end(), [&](auto &x) { return x.first->getParent() == BB; });
      if (cut && d != data.end())
        work.push_back(d->second);
      else
        for (BasicBlock *S : successors(BB))
          work.push_back(S);
    }
    return seen;
  };
  auto before = reach(false), after = reach(true);
  for (BasicBlock *BB : before)
    if (!after.contains(BB))
      for (Instruction &I : *BB)
        if (I.mayWriteToMemory()) {
          auto *St = dyn_cast<StoreInst>(&I);
          Value *P = St ? St->getPointerOperand()->stripPointerCasts() : nullptr;
          if (!(P && P->hasName() && P->getName().starts_with("hpvm.sink")))
            return true;
        }
  return false;
}

// A loop that also has an exit that does not depend on the data (a search: `for (x = 0; x <
// w; ++x) if (m[y*w + x] >= t) break;`, or an iterative refinement that stops when it
// converges: `for (s = 0; s < steps; s++) { p[i*k + j] = ...; if (err <= tol) break; }`)
// runs at most as long as that exit lets it: its data-dependent exits are removed, so that
// its reads become the affine range of the whole loop (`m[y, 0..w)`) instead of the whole
// array, and its writes the elements every iteration up to that exit writes. Both are
// supersets of the real ones: the loop's loads and stores are marked `hpvm.approx`,
// reported as `approx-read` and `may-write` (an element not written keeps its value, so the
// runtime brings it current first). A loop that writes memory any other way (an atomic, a
// call) is left as it is. Returns whether anything changed.
static bool run_searches_to_the_end(Function &F, LoopInfo &LI) {
  bool changed = false;
  for (Loop *L : LI.getLoopsInPreorder()) {
    // Plain stores are may-writes once marked; the analysis turns each load into a store of
    // its value to a sink, which is no write of the kernel's.
    bool other_writes = false;
    for (BasicBlock *BB : L->blocks())
      for (Instruction &I : *BB)
        other_writes |= !isa<StoreInst>(&I) && I.mayWriteToMemory();
    SmallVector<BasicBlock *, 4> exiting;
    L->getExitingBlocks(exiting);
    if (other_writes || exiting.size() < 2 || !only_data_escapes(L))
      continue;
    // Each data-dependent exit with the one successor that stays in the loop; a `switch`
    // exits too (clang's cleanup slot after a `break` in a scope).
    std::vector<std::pair<Instruction *, BasicBlock *>> data;
    bool plain = false, other = false;
    for (BasicBlock *BB : exiting) {
      Instruction *T = BB->getTerminator();
      Value *cond = nullptr;
      if (auto *BI = dyn_cast<BranchInst>(T); BI && BI->isConditional())
        cond = BI->getCondition();
      else if (auto *SI = dyn_cast<SwitchInst>(T))
        cond = SI->getCondition();
      if (!cond) {
        other = true;
        break;
      }
      SmallPtrSet<Value *, 16> seen;
      if (!data_dependent(cond, seen)) {
        plain = true;
        continue;
      }
      SmallPtrSet<BasicBlock *, 4> stay;
      for (BasicBlock *S : successors(BB))
        if (L->contains(S))
          stay.insert(S);
      if (stay.size() != 1) {
        other = true;
        break;
      }
      data.emplace_back(T, *stay.begin());
    }
    if (other || data.empty() || !plain || loses_writes(F, data))
      continue;
    for (auto [T, stay] : data) {
      BasicBlock *BB = T->getParent();
      // One phi entry per edge: every edge but one into `stay` goes.
      bool kept = false;
      for (BasicBlock *S : successors(BB)) {
        if (S == stay && !kept)
          kept = true;
        else
          S->removePredecessor(BB);
      }
      BranchInst::Create(stay, T->getIterator());
      T->eraseFromParent();
    }
    for (BasicBlock *BB : L->blocks())
      for (Instruction &I : *BB)
        if (isa<LoadInst>(&I) || isa<StoreInst>(&I))
          I.setMetadata("hpvm.approx", MDNode::get(F.getContext(), {}));
    changed = true;
  }
  return changed;
}

// A local table the kernel initialises from a constant (`const double a[15] = {...};`) is a
// `memcpy` from the compiler's constant global, a call Polly does not model: it dismissed
// the region, and with it every access of the kernel ("a call the analysis cannot see
// into"). The copy becomes one store per element of the constant, which is what it does.
// Only copies of a whole constant array of at most 4096 scalar elements, into memory that
// is not an argument's (a local array): a kernel's buffer written from a constant stays a
// call, and runs whole.
// The wrapper's block parameters of each dimension (`bsx`, `gx`, `bidx`, `boffx`) and the
// grid's threads in it (`bsx * gx`, the stride of `a[k * blockDim.x * gridDim.x + tid]`), as
// `llvm.assume`s in its entry block: within dashdb's standing bounds, |v| <= PARAM_LIMIT
// (2^40), which the runtime checks before it evaluates any map (a launch's instances per
// dimension, and its grid: `runtime::partitioned::split`). Polly adds them to the SCoP's
// context. Without them it records, for every access whose index multiplies the grid's
// threads, the parameters for which the 64-bit index wraps, and unites and coalesces them
// one by one: HeCBench s3d's kernels of 200 such writes each took minutes, all of it in
// `Scop::addAssumption`. Within the bounds no index wraps, and those assumptions are dropped
// as the context already excludes them. (Symmetric bounds, not the tighter `v >= 0`: with
// that, ISL rewrote many maps into more pieces, for nothing.)
static void bound_block_params(Function &F) {
  const int64_t limit = 1LL << 40;
  auto arg = [&](std::string name) -> Value * {
    for (Argument &A : F.args())
      if (A.getName() == name && A.getType()->isIntegerTy(64))
        return &A;
    return nullptr;
  };
  IRBuilder<> B(F.getEntryBlock().getTerminator());
  // Polly projects out of a user assumption the parameters it did not have yet, and meeting
  // one in an assumption is what makes it one: a parameter first seen in an access (`gx`,
  // `boffx`) lost its first assumption. So each is stated twice; the second one is kept.
  auto within = [&](Value *v, int64_t lo) {
    Value *c = B.CreateAnd(B.CreateICmpSGT(v, B.getInt64(lo - 1)), B.CreateICmpSLT(v, B.getInt64(limit + 1)));
    B.CreateAssumption(c);
    B.CreateAssumption(c);
  };
  for (const char *d : {"x", "y", "z"}) {
    Value *g = arg(std::string("g") + d), *bs = arg(std::string("bs") + d);
    for (const char *p : {"g", "bs", "bid", "boff"})
      if (Value *v = arg(std::string(p) + d))
        within(v, -limit);
    if (g && bs)
      within(B.CreateMul(bs, g, "hpvm.threads"), -limit);
  }
}

static bool expand_constant_copies(Function &F) {
  const DataLayout &DL = F.getParent()->getDataLayout();
  std::vector<MemCpyInst *> copies;
  for (Instruction &I : instructions(F))
    if (auto *MC = dyn_cast<MemCpyInst>(&I))
      copies.push_back(MC);
  bool changed = false;
  for (MemCpyInst *MC : copies) {
    auto *G = dyn_cast<GlobalVariable>(getUnderlyingObject(MC->getSource()));
    auto *Len = dyn_cast<ConstantInt>(MC->getLength());
    if (!G || !G->isConstant() || !G->hasDefinitiveInitializer() || !Len || MC->isVolatile() ||
        MC->getSource()->stripPointerCasts() != G || !isa<AllocaInst>(getUnderlyingObject(MC->getDest())))
      continue;
    Constant *Init = G->getInitializer();
    auto *AT = dyn_cast<ArrayType>(Init->getType());
    if (!AT || AT->getNumElements() > 4096 || DL.getTypeAllocSize(AT) != Len->getZExtValue())
      continue;
    Type *E = AT->getElementType();
    if (!E->isIntegerTy() && !E->isFloatingPointTy())
      continue;
    IRBuilder<> B(MC);
    for (uint64_t i = 0; i < AT->getNumElements(); ++i) {
      Value *At = B.CreateConstInBoundsGEP1_64(E, MC->getDest(), i);
      B.CreateStore(Init->getAggregateElement((unsigned)i), At);
    }
    MC->eraseFromParent();
    changed = true;
  }
  return changed;
}

// A small copy of a fixed size (`data[i] = work[j]` of a `float2` or a struct: clang's
// `memcpy` between a buffer and a local array) is a call Polly does not model, and it
// dismissed the region. It becomes what it does: a load of each piece, then a store of each
// (a `memmove` may overlap), in pieces as wide as the length and both alignments allow.
static bool expand_small_copies(Function &F) {
  std::vector<MemTransferInst *> copies;
  for (Instruction &I : instructions(F))
    if (auto *MT = dyn_cast<MemTransferInst>(&I))
      copies.push_back(MT);
  bool changed = false;
  for (MemTransferInst *MT : copies) {
    auto *Len = dyn_cast<ConstantInt>(MT->getLength());
    if (!Len || MT->isVolatile() || Len->getZExtValue() == 0 || Len->getZExtValue() > 256)
      continue;
    uint64_t n = Len->getZExtValue();
    uint64_t align = std::min(MT->getDestAlign().valueOrOne().value(), MT->getSourceAlign().valueOrOne().value());
    uint64_t piece = 8;
    while (piece > 1 && (n % piece != 0 || align % piece != 0))
      piece /= 2;
    if (n / piece > 32)
      continue;
    IRBuilder<> B(MT);
    Type *T = B.getIntNTy(8 * piece);
    std::vector<Value *> values;
    for (uint64_t at = 0; at < n; at += piece)
      values.push_back(B.CreateAlignedLoad(T, B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), MT->getSource(), at),
                                           Align(piece)));
    for (uint64_t at = 0, i = 0; at < n; at += piece, ++i)
      B.CreateAlignedStore(values[i], B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), MT->getDest(), at), Align(piece));
    MT->eraseFromParent();
    changed = true;
  }
  return changed;
}

static void prepare_loops(Function &F, FunctionAnalysisManager &FAM) {
  if (run_searches_to_the_end(F, FAM.getResult<LoopAnalysis>(F))) {
    removeUnreachableBlocks(F);
    FAM.invalidate(F, PreservedAnalyses::none());
  }
  FunctionPassManager FPM;
  FPM.addPass(UnifyLoopExitsPass());
  FPM.run(F, FAM);
  LoopInfo &LI = FAM.getResult<LoopAnalysis>(F);
  std::vector<BranchInst *> control;
  for (Loop *L : LI.getLoopsInPreorder()) {
    SmallVector<BasicBlock *, 4> blocks;
    L->getExitingBlocks(blocks);
    L->getLoopLatches(blocks);
    for (BasicBlock *BB : blocks)
      if (auto *BI = dyn_cast<BranchInst>(BB->getTerminator()))
        if (BI->isConditional() && std::find(control.begin(), control.end(), BI) == control.end())
          control.push_back(BI);
  }
  bool changed = false;
  for (BranchInst *BI : control) {
    Value *c = as_icmp(BI->getCondition(), BI);
    if (c != BI->getCondition()) {
      BI->setCondition(c);
      changed = true;
    }
  }
  if (changed)
    FAM.invalidate(F, PreservedAnalyses::none());
}

// `careful`: Polly aborted on this function before (see `polly::analyze`).
extern "C" char *hpvm_polly_analyze(LLVMModuleRef module_ref, const char *function, int careful) {
  // A function-local static is initialized exactly once even when several threads analyse at
  // the same time (the test harness does): parsing the options twice registers `-h` twice and
  // LLVM aborts with "Option 'h' registered more than once".
  static const bool options_set = [] {
    // Small kernels are "unprofitable" to Polly's optimizer; we only want the analysis.
    // LLVM's value names for parameters and arrays (`N`, `A`), not `p_0`, `MemRef3`.
    // Data-dependent subscripts, branches and loops: keep the SCoP and over-approximate them
    // (reads become "whole array", writes may-writes), so that the rest stays exact.
    // No error blocks: Polly would assume them never run, which is a guess about the input.
    // Aliasing ignored: Polly wants run-time alias checks to reorder code, and drops a SCoP
    // whose checks it cannot build (any non-affine access, e.g. a clamped read); we only read
    // the access relations, which do not depend on aliasing, and the runtime resolves aliasing
    // itself (pointers into one buffer share its coherence map).
    // No in-bounds assumptions: the analysis states them itself, per access (`bounds.rs`),
    // after it has put the parts of compound parameters where they belong, so that one read
    // whose delinearization fails costs that read its precision, not the node its split.
    // (Polly's default also simplifies each access's assumption within the parameters where
    // its statement runs, then applies it everywhere: a clamp's way that runs only for
    // `w <= 1` made the whole node assume `w = 1`, or an empty context, which dismisses it.)
    const char *argv[] = {"hpvm-mgpu",
                          "--polly-ignore-aliasing",
                          "--polly-process-unprofitable",
                          "--polly-use-llvm-names",
                          "--polly-allow-nonaffine",
                          "--polly-allow-nonaffine-loops",
                          "--polly-ignore-inbounds",
                          "--polly-allow-error-blocks=false"};
    std::vector<const char *> args(argv, argv + sizeof argv / sizeof *argv);
    // Debugging: why Polly rejects a region, as LLVM remarks on stderr.
    if (std::getenv("HPVM_MGPU_POLLY_REMARKS"))
      args.push_back("--pass-remarks-missed=polly-detect");
    // And the assumptions each SCoP takes (`HPVM_MGPU_POLLY_REMARKS=assumptions`).
    if (const char *r = std::getenv("HPVM_MGPU_POLLY_REMARKS"); r && std::string(r) == "assumptions")
      args.push_back("--pass-remarks-analysis=polly-scops");
    cl::ParseCommandLineOptions((int)args.size(), args.data(), "", nullptr, nullptr, true);
    return true;
  }();
  (void)options_set;
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

  // Careful: loops Polly cannot model make their region unmodelled instead of one boxed
  // statement (`--polly-allow-nonaffine-loops`, whose boxes Polly 19 aborted on: `domains
  // need to match` building an access inside one). The option is global: set through its
  // parser for this call, and back after.
  cl::Option *boxes = careful ? cl::getRegisteredOptions().lookup("polly-allow-nonaffine-loops") : nullptr;
  if (boxes)
    boxes->addOccurrence(0, boxes->ArgStr, "false");
  struct Restore {
    cl::Option *opt;
    ~Restore() {
      if (opt)
        opt->addOccurrence(0, opt->ArgStr, "true");
    }
  } restore{boxes};
  bound_block_params(*F);
  bool expanded = expand_constant_copies(*F);
  expanded |= expand_small_copies(*F);
  if (expanded)
    FAM.invalidate(*F, PreservedAnalyses::none());
  if (!careful)
    prepare_loops(*F, FAM);
  std::string out;
  polly::ScopInfo &SI = FAM.getResult<polly::ScopInfoAnalysis>(*F);
  if (std::getenv("HPVM_MGPU_POLLY_REMARKS")) {
    // Debugging: every region Polly rejected, with its reasons in full.
    polly::ScopDetection &SD = FAM.getResult<polly::ScopAnalysis>(*F);
    std::vector<const Region *> work{FAM.getResult<RegionInfoAnalysis>(*F).getTopLevelRegion()};
    while (!work.empty()) {
      const Region *R = work.back();
      work.pop_back();
      if (const polly::RejectLog *Log = SD.lookupRejectionLog(R))
        for (auto &Reason : *Log)
          errs() << "polly rejects " << R->getNameStr() << ": " << Reason->getMessage() << "\n";
      for (auto &Sub : *R)
        work.push_back(Sub.get());
    }
  }
  int n = 0;
  for (auto &It : SI) {
    polly::Scop *S = It.second.get();
    if (!S)
      continue;
    out += "scop\t" + std::to_string(n++) + "\t" + polly::stringFromIslObj(S->getContext()) + "\n";
    // The model holds for parameters in the assumed context and outside the invalid one.
    out += "assumed\t" + polly::stringFromIslObj(S->getAssumedContext()) + "\n";
    out += "invalid\t" + polly::stringFromIslObj(S->getInvalidContext()) + "\n";
    out += compound_params(*S);
    for (const polly::ScopArrayInfo *A : S->arrays()) {
      const Value *base = A->getBasePtr();
      out += "array\t" + A->getName() + "\t" + (base && base->hasName() ? base->getName().str() : std::string("?")) + "\t" +
             std::to_string(A->getElemSizeInBytes()) + "\t" + type_name(A->getElementType());
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
      out += std::string("domain\t") + Stmt.getBaseName() + "\t" + polly::stringFromIslObj(Stmt.getDomain()) + "\t" +
             loops_of(Stmt) + "\t" + (Stmt.isRegionStmt() ? "region" : "block") + "\n";
      for (polly::MemoryAccess *MA : Stmt) {
        if (!MA->isArrayKind())
          continue;
        const Instruction *AI = MA->getAccessInstruction();
        const char *kind = MA->isRead() ? (AI && AI->getMetadata("hpvm.loosened")  ? "loosened-read"
                                           : AI && AI->getMetadata("hpvm.approx") ? "approx-read"
                                                                                   : "read")
                           : MA->isMustWrite() && !(AI && AI->getMetadata("hpvm.approx")) ? "must-write"
                                                                                           : "may-write";
        out += std::string("access\t") + Stmt.getBaseName() + "\t" + kind + "\t" + (MA->isAffine() ? "affine" : "non-affine") + "\t" +
               polly::stringFromIslObj(MA->getAccessRelation()) + "\t" + where(MA->getAccessInstruction()) + "\n";
        if (!MA->isRead() && !MA->isAffine()) {
          // Whether the index depends on a loaded value (a scatter) or is only beyond
          // Presburger arithmetic (a product of parameters, a non-affine loop): the user's
          // fix differs.
          if (auto *St = dyn_cast_or_null<StoreInst>(MA->getAccessInstruction()))
            out += std::string("index\t") + why_unmodeled(*St, St->getPointerOperand()) + "\n";
          out += through(Stmt, MA);
        }
      }
    }
  }
  // Memory accesses no SCoP models: whoever reads the result must not take it as complete.
  for (Instruction &I : instructions(*F)) {
    const Value *P = nullptr;
    const char *kind = "read";
    if (auto *L = dyn_cast<LoadInst>(&I))
      P = L->getPointerOperand();
    else if (auto *St = dyn_cast<StoreInst>(&I))
      P = St->getPointerOperand(), kind = "write";
    else if (auto *A = dyn_cast<AtomicRMWInst>(&I))
      P = A->getPointerOperand(), kind = "write";
    else if (auto *C = dyn_cast<AtomicCmpXchgInst>(&I))
      P = C->getPointerOperand(), kind = "write";
    else if (auto *CB = dyn_cast<CallBase>(&I)) {
      if (CB->doesNotAccessMemory() || isa<AssumeInst>(CB))
        continue;
      // A device `assert` that fails: it reads only the compiler's constant strings and
      // ends the kernel, writing no buffer.
      if (const Function *Callee = CB->getCalledFunction())
        if (Callee->getName() == "__assertfail" || Callee->getName() == "__assert_fail")
          continue;
      out += std::string("outside\tcall\t?\tshape\t") + where(&I) + "\n";
      continue;
    } else
      continue;
    // A thread's own local array is no buffer: what it holds is data to the analysis.
    if (isa<AllocaInst>(getUnderlyingObject(P, 0)))
      continue;
    bool modeled = false;
    for (auto &It : SI)
      if (It.second && It.second->contains(&I))
        modeled = true;
    if (!modeled)
      out += std::string("outside\t") + kind + "\t" + base_name(P) + "\t" + why_unmodeled(I, P) + "\t" + where(&I) + "\n";
  }
  return copy_out(out);
}

extern "C" void hpvm_polly_free(char *text) { std::free(text); }
