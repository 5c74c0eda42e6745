// Package logstyle checks the one rule of log messages that no linter knows: a message
// starts in lower case, as controller-runtime's and Karpenter's do, unless its first word
// is a name (NodeClaim, CreateFleet, EKS) that keeps its capitals. What else makes a log
// call structured and contextual is logcheck's part (hack/verify-lint.sh).
package logstyle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// roots are the directories, relative to the module root, whose Go files are checked.
var roots = []string{"plugin", "provisioner", "test", "hack"}

// messageArg is the position of the message among the arguments of a logr method.
var messageArg = map[string]int{"Info": 0, "Error": 1}

// capitalised reports whether msg opens with an ordinary word in title case: an upper-case
// letter followed by lower-case ones only. A word with capitals further in (NodeClaim,
// CreateFleet) or in capitals only (EKS, JSON) is a name and may open a message.
func capitalised(msg string) bool {
	word, _, _ := strings.Cut(msg, " ")
	word = strings.TrimRightFunc(word, func(r rune) bool { return !unicode.IsLetter(r) })
	runes := []rune(word)
	if len(runes) < 2 || !unicode.IsUpper(runes[0]) {
		return false
	}
	for _, r := range runes[1:] {
		if !unicode.IsLower(r) {
			return false
		}
	}
	return true
}

func TestCapitalised(t *testing.T) {
	tests := map[string]bool{
		"launched the NodeClaim":       false,
		"Launched the NodeClaim":       true,
		"NodeClaim launched":           false,
		"CreateFleet launched nothing": false,
		"EKS discovery failed":         false,
		"Deleting, then waiting":       true,
		"A":                            false,
		"":                             false,
	}
	for msg, want := range tests {
		if got := capitalised(msg); got != want {
			t.Errorf("capitalised(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestMessagesStartLowerCase fails on every Info or Error call whose literal message opens
// with a capitalised ordinary word, and names the file and line.
func TestMessagesStartLowerCase(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, root := range roots {
		err := filepath.WalkDir(filepath.Join("..", "..", root), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") {
				return nil
			}
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			checked++
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				i, ok := messageArg[sel.Sel.Name]
				if !ok || len(call.Args) <= i {
					return true
				}
				lit, ok := call.Args[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				msg, err := strconv.Unquote(lit.Value)
				if err == nil && capitalised(msg) {
					t.Errorf("%s: log message %q starts with a capital letter: start it in lower case", fset.Position(lit.Pos()), msg)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Fatal("no Go file was checked: run the test from hack/logstyle")
	}
}
