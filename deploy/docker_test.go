package deploy

import (
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// parseDockerfile parses the Dockerfile with BuildKit's own parser and
// linter (the checks of docker build --check that need no base image);
// any warning fails the test.
func parseDockerfile(t *testing.T) []instructions.Stage {
	t.Helper()
	f, err := os.Open(repoPath("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile:%d: %s", w.Location.Start.Line, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, description, url, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		t.Errorf("Dockerfile:%d: %s: %s (%s)", line, rule, msg, url)
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return stages
}

// TestDockerfileShape: multi-stage, the final image is small, runs as a
// non-root user and only receives the build stage's binaries.
func TestDockerfileShape(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a small final one", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(build.BaseName, "golang:") {
		t.Errorf("build stage from %s, want golang", build.BaseName)
	}
	// The compose healthchecks of the lockstep image call wget: busybox's.
	if !strings.HasPrefix(final.BaseName, "alpine:") {
		t.Errorf("final stage from %s, want alpine (small, with busybox wget for the healthchecks)", final.BaseName)
	}
	var user string
	copied := false
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.CopyCommand:
			if c.From != build.Name {
				t.Errorf("final stage copies from %q, want only the build stage %q", c.From, build.Name)
			}
			copied = true
		}
	}
	if !copied {
		t.Error("final stage copies nothing from the build stage")
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final stage runs as %q, want a non-root user", user)
	}
}

// TestDockerfileBuildsStaticBinaries runs the build stage's RUN commands
// on a copy of the build context (the repository less .dockerignore, as
// docker sends it), with the stage's ENV, and checks the binaries the final
// stage copies: shop, loadgen and workshop, statically linked.
func TestDockerfileBuildsStaticBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compiles three static binaries")
	}
	stages := parseDockerfile(t)
	build, final := stages[0], stages[len(stages)-1]
	buildContext := copyBuildContext(t)

	var outDir string
	for _, c := range final.Commands {
		if c, ok := c.(*instructions.CopyCommand); ok && c.From == build.Name {
			outDir = c.SourcePaths[0]
		}
	}
	out := filepath.Join(t.TempDir(), "out") + "/"
	env := os.Environ()
	ran := 0
	for _, c := range build.Commands {
		switch c := c.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env = append(env, kv.Key+"="+kv.Value)
			}
		case *instructions.RunCommand:
			script := strings.ReplaceAll(strings.Join(c.CmdLine, " "), outDir, out)
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir, cmd.Env = buildContext, env
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("RUN %s: %v\n%s", script, err, b)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("the build stage runs nothing")
	}
	for _, name := range []string{"shop", "loadgen", "workshop"} {
		f, err := elf.Open(filepath.Join(out, name))
		if err != nil {
			t.Errorf("%s not built: %v", name, err)
			continue
		}
		libs, _ := f.ImportedLibraries()
		interp := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		f.Close()
		if len(libs) > 0 || interp {
			t.Errorf("%s is dynamically linked (%v): it would not run on the final image", name, libs)
		}
	}
}

// copyBuildContext copies the repository's files that .dockerignore lets
// through into a temporary directory.
func copyBuildContext(t *testing.T) string {
	t.Helper()
	f, err := os.Open(repoPath(".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	root := repoPath()
	sent := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		excluded, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if excluded {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		sent[strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]] = true
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, filepath.Join(dst, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, notSent := range []string{".git", "out", "deploy", "grafana", "bench"} {
		if sent[notSent] {
			t.Errorf("the build context includes %s: .dockerignore should keep it out", notSent)
		}
	}
	return dst
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
