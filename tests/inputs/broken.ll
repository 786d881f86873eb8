; Not LLVM IR that parses: a function without a body's closing brace.
define void @f() {
entry:
  ret void
