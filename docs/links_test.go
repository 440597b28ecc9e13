// Package docs holds the checks on lockstep's documentation: README.md is a
// front door that links into the pages of this directory, and a link that
// points nowhere, or a command that is not the one CI runs, would send a
// reader the wrong way without any test noticing.
package docs

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repo is the repository root, relative to this package.
const repo = ".."

// checkedPages are the repository's Markdown files (README.md, docs/,
// BENCHMARKS.md, each package's README), whose relative links must resolve;
// hidden directories and out/ (reports of local runs) are not documentation.
func checkedPages(t *testing.T) []string {
	t.Helper()
	var pages []string
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != repo && (strings.HasPrefix(d.Name(), ".") || path == filepath.Join(repo, "out")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

var (
	fence       = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan    = regexp.MustCompile("`[^`\n]*`")
	inlineLink  = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink     = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	atxHeading  = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag     = regexp.MustCompile(`<[^>]+>`)
	lineAnchor  = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// prose is a Markdown file with its fenced code blocks blanked out (their
// lines kept, empty), so neither links nor headings are found inside them.
func prose(markdown string) []string {
	lines := strings.Split(markdown, "\n")
	var open string
	for i, l := range lines {
		if m := fence.FindStringSubmatch(l); m != nil {
			switch open {
			case "":
				open = m[1]
			case m[1]:
				open = ""
			}
			lines[i] = ""
			continue
		}
		if open != "" {
			lines[i] = ""
		}
	}
	return lines
}

// anchor is the id GitHub gives a heading: its text as rendered (code
// spans' and links' text kept, markup dropped), lower-cased, every
// character that is not a letter, a digit, a space, a hyphen or an
// underscore removed, and each space turned into a hyphen.
func anchor(heading string) string {
	text := headingLink.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the ids of a Markdown file's headings; a repeated heading's
// ids get -1, -2, … as on GitHub.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(string(raw)) {
		m := atxHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		id := anchor(m[1])
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// links are the targets of a Markdown file's inline and reference links
// and images, outside code blocks and code spans.
func links(markdown string) []string {
	text := codeSpan.ReplaceAllString(strings.Join(prose(markdown), "\n"), "")
	var targets []string
	for _, re := range []*regexp.Regexp{inlineLink, refLink} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

func external(target string) bool {
	return strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:")
}

// TestEveryRelativeLinkPointsAtAFileOrAnchorThatExists follows every link
// of the README, the docs pages and the other Markdown files that stays in
// the repository: its file
// must exist, and an anchor must be a heading of that Markdown file (or a
// line of another file).
func TestEveryRelativeLinkPointsAtAFileOrAnchorThatExists(t *testing.T) {
	checked := 0
	for _, page := range checkedPages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range links(string(raw)) {
			if external(target) {
				continue
			}
			checked++
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: %v", page, target, err)
				continue
			}
			switch {
			case frag == "":
			case strings.HasSuffix(path, ".md"):
				if !anchors(t, path)[frag] {
					t.Errorf("%s: link %q: %s has no heading with the anchor #%s", page, target, path, frag)
				}
			case !lineAnchor.MatchString(frag):
				t.Errorf("%s: link %q: #%s is neither a heading of a Markdown file nor a line", page, target, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the pages or the link parser moved")
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"The `cluster` profile: the shop on a Redis Cluster":                        "the-cluster-profile-the-shop-on-a-redis-cluster",
		"Selling exactly once: `Idempotency-Key` and reset":                         "selling-exactly-once-idempotency-key-and-reset",
		"Beyond Redis: the seed's other lock systems":                               "beyond-redis-the-seeds-other-lock-systems",
		"Failure scenarios: where each lock loses stock, and the one that does not": "failure-scenarios-where-each-lock-loses-stock-and-the-one-that-does-not",
		"docker compose":               "docker-compose",
		"Results on this machine":      "results-on-this-machine",
		"See [the lock](lock.md) here": "see-the-lock-here",
		"x 2 × 3 = 6, snake_case, 锁分段": "x-2--3--6-snake_case-锁分段",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestLinksSkipCodeAndKeepEveryKindOfLink(t *testing.T) {
	md := "[a](a.md) ![b](b.png \"title\") `[c](c.md)` <https://x.example/>\n" +
		"```sh\n[d](d.md)\n```\n[e\ntext](e.md#h) [f](https://f.example/)\n[g]: g.md\n"
	want := []string{"a.md", "b.png", "e.md#h", "https://f.example/", "g.md"}
	if got := links(md); !slices.Equal(got, want) {
		t.Errorf("links = %q, want %q", got, want)
	}
}

// commands are the shell commands of the README's "The two commands"
// section's fenced sh block, each without its comment.
func commands(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## The two commands\n")
	if !ok {
		t.Fatal(`README.md has no "## The two commands" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("the two commands section has no fenced sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	var cmds []string
	for _, l := range strings.Split(block, "\n") {
		if cmd := command(l); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// command is a shell line without its comment, its spacing normalised.
func command(line string) string {
	cmd, _, _ := strings.Cut(line, "#")
	return strings.Join(strings.Fields(cmd), " ")
}

// ciCommands are .ci/run's commands, without its shell set-up.
func ciCommands(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "set ") || strings.HasPrefix(l, "cd ") {
			continue
		}
		cmds = append(cmds, l)
	}
	return cmds
}

// TestTheTwoCommandsAreTheOnesCIAndTheWorkshopUse: the README's test
// command is what .ci/run runs, and its workshop command runs the
// workshop's main package as that package's own documentation says.
func TestTheTwoCommandsAreTheOnesCIAndTheWorkshopUse(t *testing.T) {
	cmds := commands(t)
	if want := []string{"go run ./cmd/workshop", "make test"}; !slices.Equal(cmds, want) {
		t.Fatalf("the README's two commands are %q, want %q", cmds, want)
	}
	if ci := ciCommands(t); !slices.Equal(ci, []string{"make test"}) {
		t.Errorf(".ci/run runs %q; the README says CI runs `make test`", ci)
	}
	makefile, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^test:`).Match(makefile) {
		t.Error("the Makefile has no test target")
	}

	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repo, "cmd", "workshop", "main.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name.Name != "main" {
		t.Errorf("./cmd/workshop is package %s, not a command", f.Name.Name)
	}
	var usage []string
	for _, l := range strings.Split(f.Doc.Text(), "\n") {
		usage = append(usage, command(l))
	}
	if !slices.Contains(usage, cmds[0]) {
		t.Errorf("cmd/workshop's documentation does not show %q:\n%s", cmds[0], f.Doc.Text())
	}
}

// Article references a reader cannot look up (the numbers of the files
// the articles were collected in), issue numbers and commit hashes: the
// user docs name an article by its title (docs/articles.md), and history
// belongs in git.
var (
	unfindableArticle = regexp.MustCompile(`\b00[0-4] ?§|\bseeds? 00[0-4]|\b00[0-4]\s*[–-]\s*00[0-4]\b|\(seed\b|\bseed 00`)
	issueNumber       = regexp.MustCompile(`(?i)\bissues? #?\d+`)
	commitHash        = regexp.MustCompile(`\b(?:at|across|commit) [0-9a-f]{7,12}\b`)
)

// TestDocsNameTheArticlesAndLeaveHistoryToGit: no user-facing page, Go
// doc comment, scenario or stage catalog refers to an article by a
// number, and no user doc (README.md, BENCHMARKS.md, docs/ but the
// benchmark history, lock/README.md) cites an issue or a commit.
func TestDocsNameTheArticlesAndLeaveHistoryToGit(t *testing.T) {
	var files []string
	userDocs := map[string]bool{}
	for _, page := range checkedPages(t) {
		if strings.Contains(page, string(filepath.Separator)+"out"+string(filepath.Separator)) {
			continue
		}
		files = append(files, page)
		rel, _ := filepath.Rel(repo, page)
		userDocs[page] = rel == "README.md" || rel == "BENCHMARKS.md" || rel == filepath.Join("lock", "README.md") ||
			filepath.Dir(rel) == "docs" && rel != filepath.Join("docs", "benchmarks-history.md")
	}
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// out/ holds local runs' reports.
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != repo || d.Name() == "out" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		ext := filepath.Ext(path)
		if !d.IsDir() && (ext == ".go" && !strings.HasSuffix(path, "_test.go") || ext == ".yaml" || ext == ".html" || ext == ".tmpl" || ext == ".js") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := unfindableArticle.FindString(line); m != "" {
				t.Errorf("%s:%d: %q names an article by its number; name it by its title (docs/articles.md)", path, i+1, m)
			}
			if !userDocs[path] {
				continue
			}
			for _, re := range []*regexp.Regexp{issueNumber, commitHash} {
				if m := re.FindString(line); m != "" {
					t.Errorf("%s:%d: %q: issue numbers and commits belong in git, not in the docs", path, i+1, m)
				}
			}
		}
	}
}
