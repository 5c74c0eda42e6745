package docs

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/stacktest"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// blockTimeout bounds one command block: blocks wait with kubectl wait --timeout, not forever.
const blockTimeout = 4 * time.Minute

// pageBlocks reads every user page and returns its command blocks; a fence that does not say
// where its commands run fails the test.
func pageBlocks(t *testing.T, root string) map[string][]Block {
	t.Helper()
	pages, err := Pages(os.DirFS(root))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string][]Block{}
	for _, p := range pages {
		src, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Parse(p, src)
		if err != nil {
			t.Error(err)
		}
		all[p] = blocks
	}
	return all
}

// TestCommands runs, page by page, every command block the docs say runs against the local
// stack: in order, on a fresh stack for the page, with the stack's exports and the built
// binaries on PATH, from the repository root, as a reader following the page would.
func TestCommands(t *testing.T) {
	root := testenv.Root()
	all := pageBlocks(t, root)
	var pages []string
	for _, p := range slices.Sorted(maps.Keys(all)) {
		for _, b := range all[p] {
			if b.Kind == Local {
				pages = append(pages, p)
				break
			}
		}
	}
	if len(pages) == 0 {
		t.Fatal("no page has a command block fenced ```sh: the docs' commands would go untested")
	}
	for _, p := range pages {
		t.Run(p, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			stack, _, _ := stacktest.Start(t, ctx, localstack.Options{})
			env := append(os.Environ(), stack.Exports()...)
			env = append(env, "PATH="+filepath.Join(root, "_output", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
			for _, b := range all[p] {
				if b.Kind != Local {
					continue
				}
				if !run(t, ctx, root, env, b) {
					return
				}
			}
		})
	}
}

// run runs one block and reports whether it succeeded; a failure logs the block and its
// output, and the page's later blocks are not run, since they build on it.
func run(t *testing.T, ctx context.Context, root string, env []string, b Block) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.Script)
	cmd.Dir, cmd.Env = root, env
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: the block failed after %s: %v\n--- block\n%s--- output\n%s", b, time.Since(start).Round(time.Second), err, b.Script, out)
		return false
	}
	t.Logf("%s: ok in %s: %s", b, time.Since(start).Round(time.Second), firstLine(b.Script))
	return true
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
