package rules

import (
	"math"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
)

// semantics names the rule language: the CEL libraries and the way JSON
// values become CEL values. It is part of a Set's hash, and changes when
// either does, so that a value checked under other semantics is known to
// be.
const semantics = "fixpoint-rules/1 cel-go/v0.33.3 strings/5 lists/5 math/3 sets/0 sum mixed-arith"

// maxRange bounds lists.range(n), which allocates its list before its
// cost is counted.
const maxRange = 10_000

// baseEnv is the environment every rule compiles in, before its schema's
// types and its own self are declared: CEL's standard library, numeric
// comparison across int and double, the strings, lists, math and sets
// extensions (pinned versions), sum(), and int-double arithmetic.
var baseEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxRuleLength),
		ext.Strings(ext.StringsVersion(5)),
		ext.Lists(ext.ListsVersion(5), ext.ListsMaxRangeSize(maxRange)),
		ext.Math(ext.MathVersion(3)),
		ext.Sets(ext.SetsVersion(0)),
		sumFunction(),
		mixedArithmetic(),
	)
})

// sumFunction declares list.sum(): the sum of a list of numbers, 0 for an
// empty one. A list of ints sums to an int (an overflow is an error), one
// that holds a double to a double.
func sumFunction() cel.EnvOption {
	return cel.Function("sum",
		cel.MemberOverload("list_int_sum", []*cel.Type{cel.ListType(cel.IntType)}, cel.IntType,
			cel.UnaryBinding(func(l ref.Val) ref.Val { return sum(l, types.IntZero) })),
		cel.MemberOverload("list_double_sum", []*cel.Type{cel.ListType(cel.DoubleType)}, cel.DoubleType,
			cel.UnaryBinding(func(l ref.Val) ref.Val { return sum(l, types.Double(0)) })),
	)
}

// sum adds up the numbers of the list l, starting from zero; an int
// meeting a double becomes a double.
func sum(l ref.Val, zero ref.Val) ref.Val {
	list, ok := l.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(l)
	}
	acc := zero
	for it := list.Iterator(); it.HasNext() == types.True; {
		x := it.Next()
		switch a := acc.(type) {
		case types.Int:
			if d, ok := x.(types.Double); ok {
				acc = types.Double(float64(a)) + d
				continue
			}
		case types.Double:
			if i, ok := x.(types.Int); ok {
				acc = a + types.Double(float64(i))
				continue
			}
		}
		adder, ok := acc.(traits.Adder)
		if !ok {
			return types.MaybeNoSuchOverloadErr(acc)
		}
		acc = adder.Add(x)
		if types.IsError(acc) {
			return acc
		}
	}
	return acc
}

// arithmetic are the operators that take an int and a double.
var arithmetic = []struct{ fn, name string }{
	{"_+_", "add"}, {"_-_", "subtract"}, {"_*_", "multiply"}, {"_/_", "divide"},
}

// mixedArithmetic declares +, -, * and / on an int and a double (either
// way round) as giving a double. The declarations only let such a rule
// type-check; promote then rewrites each such call to convert its int
// operand with double(), so that what runs is CEL's own double
// arithmetic.
func mixedArithmetic() cel.EnvOption {
	var opts []cel.EnvOption
	for _, op := range arithmetic {
		opts = append(opts, cel.Function(op.fn,
			cel.Overload(op.name+"_int_double", []*cel.Type{cel.IntType, cel.DoubleType}, cel.DoubleType),
			cel.Overload(op.name+"_double_int", []*cel.Type{cel.DoubleType, cel.IntType}, cel.DoubleType)))
	}
	return cel.Lib(optionsLib(opts))
}

// optionsLib is a cel.Library of plain options.
type optionsLib []cel.EnvOption

func (l optionsLib) CompileOptions() []cel.EnvOption   { return l }
func (optionsLib) ProgramOptions() []cel.ProgramOption { return nil }

// promote is the AST optimizer that rewrites int-double arithmetic: in a
// call of +, -, * or / whose operands the checker typed int and double,
// the int operand becomes double(operand).
type promote struct{}

// Optimize implements cel.ASTOptimizer.
func (promote) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	var walk func(e ast.Expr)
	walk = func(e ast.Expr) {
		for _, c := range children(e) {
			walk(c)
		}
		if e.Kind() != ast.CallKind {
			return
		}
		call := e.AsCall()
		args := call.Args()
		if call.IsMemberFunction() || len(args) != 2 || !isArithmetic(call.FunctionName()) {
			return
		}
		l, r := a.GetType(args[0].ID()), a.GetType(args[1].ID())
		switch {
		case isInt(l) && isDouble(r):
			args[0] = ctx.NewCall("double", args[0])
		case isDouble(l) && isInt(r):
			args[1] = ctx.NewCall("double", args[1])
		default:
			return
		}
		ctx.UpdateExpr(e, ctx.NewCall(call.FunctionName(), args...))
	}
	walk(a.Expr())
	return a
}

// children returns the subexpressions of e.
func children(e ast.Expr) []ast.Expr {
	switch e.Kind() {
	case ast.CallKind:
		c := e.AsCall()
		out := append([]ast.Expr(nil), c.Args()...)
		if c.IsMemberFunction() {
			out = append(out, c.Target())
		}
		return out
	case ast.SelectKind:
		return []ast.Expr{e.AsSelect().Operand()}
	case ast.ListKind:
		return e.AsList().Elements()
	case ast.MapKind:
		var out []ast.Expr
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			out = append(out, me.Key(), me.Value())
		}
		return out
	case ast.StructKind:
		var out []ast.Expr
		for _, f := range e.AsStruct().Fields() {
			out = append(out, f.AsStructField().Value())
		}
		return out
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		return []ast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()}
	}
	return nil
}

func isArithmetic(fn string) bool {
	for _, op := range arithmetic {
		if op.fn == fn {
			return true
		}
	}
	return false
}

func isInt(t *types.Type) bool    { return t != nil && t.Kind() == types.IntKind }
func isDouble(t *types.Type) bool { return t != nil && t.Kind() == types.DoubleKind }

// callCost counts the runtime cost of sum() as the size of its list, so
// that summing a list inside a loop over it counts what it does.
type callCost struct{}

// CallCost implements cost.ActualCostEstimator.
func (callCost) CallCost(function, _ string, args []ref.Val, _ ref.Val) *uint64 {
	if function != "sum" || len(args) != 1 {
		return nil
	}
	s, ok := args[0].(traits.Sizer)
	if !ok {
		return nil
	}
	n, ok := s.Size().(types.Int)
	if !ok || n < 0 {
		return nil
	}
	c := uint64(n) + 1
	if c > math.MaxUint32 {
		c = math.MaxUint32
	}
	return &c
}
