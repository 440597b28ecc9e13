package lockserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAServerThatExitsEarlyIsStartedAgain: a start whose server exits
// before it is ready (a real process: false(1), as a server that lost its
// port exits) is tried again in a directory of its own; a start that fails
// otherwise is not, and three early exits are the last one's error.
func TestAServerThatExitsEarlyIsStartedAgain(t *testing.T) {
	exits := func(ctx context.Context, dir string) error {
		p, err := startProcess("false", nil, filepath.Join(dir, "server.log"))
		if err != nil {
			return err
		}
		return p.waitUntil(ctx, "false", func(context.Context) error { return errors.New("not yet") })
	}
	notReady := errors.New("not ready")
	cases := []struct {
		name     string
		outcomes []string // per attempt: "exit", "fail" or "ok"
		wantErr  error
		attempts int
	}{
		{"exits once, then serves", []string{"exit", "ok"}, nil, 2},
		{"fails otherwise: no retry", []string{"fail", "ok"}, notReady, 1},
		{"exits every time", []string{"exit", "exit", "exit", "ok"}, errExited, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			root := t.TempDir()
			var dirs []string
			_, err := retryExited(root, func(dir string) (string, error) {
				dirs = append(dirs, dir)
				if _, err := os.Stat(dir); err != nil {
					t.Errorf("attempt %d: its directory: %v", len(dirs), err)
				}
				switch c.outcomes[len(dirs)-1] {
				case "exit":
					return "", exits(ctx, dir)
				case "fail":
					return "", notReady
				}
				return "serving", nil
			})
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Errorf("error %v, want %v", err, c.wantErr)
			}
			if len(dirs) != c.attempts {
				t.Fatalf("%d attempts (%v), want %d", len(dirs), dirs, c.attempts)
			}
			if dirs[0] != root || (len(dirs) > 1 && dirs[1] == dirs[0]) {
				t.Errorf("attempts' directories %v: the first is %s, each its own", dirs, root)
			}
		})
	}
}
