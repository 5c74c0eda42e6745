// Package docs finds the shell commands in the project's Markdown pages, so that a test can
// run those a user runs against the local stack and no page drifts from what works.
//
// A command block's fence says where it runs:
//
//	```sh             against the local stack (make up); the test runs it
//	```sh aws         needs AWS or EKS; not run
//	```sh standalone  starts its own stack or runs long (make demo, make bench-*); not run
package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// Kind is where a command block runs.
type Kind string

const (
	// Local blocks run against the local stack.
	Local Kind = "local"
	// AWS blocks need an AWS account or an EKS cluster.
	AWS Kind = "aws"
	// Standalone blocks start their own stack or run long.
	Standalone Kind = "standalone"
)

// Block is one fenced command block of a page.
type Block struct {
	// Page is the page's path from the repository root; Line the line of its opening fence.
	Page string
	Line int
	Kind Kind
	// Script is the block's text, run as one bash script.
	Script string
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.Page, b.Line) }

// shells are fence languages of commands that must say where they run with sh's markers.
var shells = map[string]bool{"bash": true, "shell": true, "console": true, "zsh": true, "shell-session": true}

// markers are the words after ```sh and the kind each names.
var markers = map[string]Kind{"": Local, "aws": AWS, "standalone": Standalone}

// Parse returns the command blocks of a Markdown page, in order. A shell block fenced other
// than as ```sh, or with a marker it does not know, is an error naming the line and the fix.
func Parse(page string, src []byte) ([]Block, error) {
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	var blocks []Block
	var errs []string
	err := ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		fence, ok := n.(*ast.FencedCodeBlock)
		if !entering || !ok || fence.Info == nil {
			return ast.WalkContinue, nil
		}
		info := strings.Fields(string(fence.Info.Segment.Value(src)))
		if len(info) == 0 {
			return ast.WalkContinue, nil
		}
		line := fenceLine(src, fence)
		lang, marker := info[0], strings.Join(info[1:], " ")
		switch {
		case shells[lang]:
			errs = append(errs, fmt.Sprintf("%s:%d: commands are fenced ```sh (run against the local stack), ```sh aws or ```sh standalone, not ```%s", page, line, lang))
		case lang == "sh":
			kind, known := markers[marker]
			if !known {
				errs = append(errs, fmt.Sprintf("%s:%d: ```sh %s: the words after ```sh are aws (needs AWS) or standalone (starts its own stack), or nothing (runs against the local stack)", page, line, marker))
				break
			}
			var script bytes.Buffer
			for i := 0; i < fence.Lines().Len(); i++ {
				seg := fence.Lines().At(i)
				script.Write(seg.Value(src))
			}
			blocks = append(blocks, Block{Page: page, Line: line, Kind: kind, Script: script.String()})
		}
		return ast.WalkSkipChildren, nil
	})
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return blocks, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return blocks, nil
}

// fenceLine is the 1-based line of a fenced block's opening fence.
func fenceLine(src []byte, fence *ast.FencedCodeBlock) int {
	var start int
	if fence.Lines().Len() > 0 {
		start = fence.Lines().At(0).Start
		return bytes.Count(src[:start], []byte("\n"))
	}
	start = fence.Info.Segment.Start
	return bytes.Count(src[:start], []byte("\n")) + 1
}

// Pages are the user pages whose commands are checked: README.md and every page under
// docs/ but the generated reference and the design notes.
func Pages(root fs.FS) ([]string, error) {
	pages := []string{"README.md"}
	err := fs.WalkDir(root, "docs", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (p == "docs/reference" || p == "docs/design") {
			return fs.SkipDir
		}
		if !d.IsDir() && path.Ext(p) == ".md" {
			pages = append(pages, p)
		}
		return nil
	})
	return pages, err
}
