// Command linkcheck fails when a relative link in the repository's Markdown points at a file
// that does not exist, or at an anchor its page does not have: hack/verify-links.sh runs it
// over every tracked Markdown file. Links to other sites are not followed.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func main() {
	files := os.Args[1:]
	if len(files) == 0 {
		out, err := exec.Command("git", "ls-files", "*.md").Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "linkcheck: listing the Markdown files:", err)
			os.Exit(2)
		}
		files = strings.Fields(string(out))
	}
	broken, err := check(os.DirFS("."), files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "linkcheck:", err)
		os.Exit(2)
	}
	for _, b := range broken {
		fmt.Fprintln(os.Stderr, b)
	}
	if len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "%d broken links in %d Markdown files\n", len(broken), len(files))
		os.Exit(1)
	}
}
