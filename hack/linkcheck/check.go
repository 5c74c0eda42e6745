package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode"
)

// link matches an inline Markdown link or image: [text](target) or [text](target "title").
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// heading matches an ATX heading; explicitAnchor an HTML anchor with an id or a name.
var (
	heading        = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	explicitAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// page is what links may point at in one Markdown file: its anchors.
type page struct {
	anchors map[string]bool
	links   []found
}

// found is a link as written, and where.
type found struct {
	target string
	line   int
}

// check reads the files from fsys and returns, one a line, every relative link that points
// at a missing file or a missing anchor.
func check(fsys fs.FS, files []string) ([]string, error) {
	pages := map[string]*page{}
	read := func(name string) (*page, error) {
		if p, ok := pages[name]; ok {
			return p, nil
		}
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		p := parse(raw)
		pages[name] = p
		return p, nil
	}
	var broken []string
	for _, name := range files {
		p, err := read(name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		for _, l := range p.links {
			if problem := resolve(fsys, name, l.target, read); problem != "" {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", name, l.line, l.target, problem))
			}
		}
	}
	return broken, nil
}

// resolve says what is wrong with a link from the file from, "" when nothing is.
func resolve(fsys fs.FS, from, target string, read func(string) (*page, error)) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	name := from
	if file != "" {
		name = path.Clean(path.Join(path.Dir(from), file))
		if strings.HasPrefix(name, "../") {
			return "points outside the repository"
		}
		info, err := fs.Stat(fsys, name)
		if err != nil {
			return "no such file or directory"
		}
		if info.IsDir() || !strings.HasSuffix(name, ".md") {
			if anchor != "" {
				return "an anchor into a file that is not Markdown"
			}
			return ""
		}
	}
	if anchor == "" {
		return ""
	}
	p, err := read(name)
	if err != nil {
		return err.Error()
	}
	if !p.anchors[anchor] {
		return fmt.Sprintf("%s has no heading or anchor %q", name, anchor)
	}
	return ""
}

// parse collects a page's anchors (GitHub's, from its headings, and explicit ones) and its
// links, leaving fenced code blocks and inline code out.
func parse(raw []byte) *page {
	p := &page{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range explicitAnchor.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := slugOf(m[1])
			if k := seen[slug]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				p.anchors[slug] = true
			}
			seen[slug]++
		}
		for _, m := range link.FindAllStringSubmatch(withoutInlineCode(line), -1) {
			p.links = append(p.links, found{target: m[1], line: n})
		}
	}
	return p
}

// withoutInlineCode blanks `code spans`, whose brackets are no links.
func withoutInlineCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// slugOf is GitHub's anchor of a heading: its text without markup, lower case, with
// letters, digits, '-' and '_' kept, spaces made '-' and everything else dropped.
func slugOf(text string) string {
	text = markupLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// markupLink is a link inside a heading, whose text is what the anchor is made of.
var markupLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
