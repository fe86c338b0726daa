package activities

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every error type an activity returns is one of errors.go's constants:
// the workflows, starters and the Web UI match on those strings, and a
// literal spelled elsewhere is one nobody lists (NonRetryableErrorTypes,
// the README) and one typo away from another type.
func TestErrorTypesAreNamedConstants(t *testing.T) {
	ctors := map[string]bool{"NewApplicationError": true, "NewApplicationErrorWithCause": true, "NewNonRetryableApplicationError": true}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !ctors[sel.Sel.Name] {
				return true
			}
			if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				t.Errorf("%s: error type %s spelled as a literal: name it in errors.go", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
