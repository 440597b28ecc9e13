package deploy

import (
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeImagesOnEngine runs, on a Docker engine, the services of the
// main stack whose images are pulled and wait for no built service (the
// stores, the lock servers, redis-exporter), from the same images as
// TestComposeOnEngine (stand-ins made from deploy/images.json when the
// engine has not the official ones), in a minute rather than that test's
// several: every service healthy, the zoo.cfg the zookeeper image wrote
// bounds sessions as the stage needs, and docker compose down leaves no
// volume behind (an image's VOLUME no tmpfs covers fails it, naming the
// service).
func TestComposeImagesOnEngine(t *testing.T) {
	c, p := composeOnEngine(t)
	c.profile = mainStack
	services := pulledServices(p)
	t.Logf("services: %v", services)
	if _, err := c.runErr(t, append([]string{"up", "-d", "--wait"}, services...)...); err != nil {
		logs, _ := c.command("logs", "--no-color", "--tail", "20").CombinedOutput()
		t.Fatalf("%v\nthe services' last logs:\n%s", err, logs)
	}

	zk := p.Services["zookeeper"]
	cfg := c.run(t, "exec", "-T", "zookeeper", "sh", "-c", `cat "$ZOO_CONF_DIR/zoo.cfg"`)
	settings := map[string]string{}
	for _, line := range strings.Split(cfg, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			settings[k] = v
		}
	}
	t.Logf("%s's zoo.cfg: %v", zk.Image, settings)
	checkZooKeeperSessions(t, settings)

	c.down(t, nil)
}

// pulledServices are the main stack's services that run a pulled image
// (one the engine has or a stand-in stands for) and depend, directly or
// not, on no service built from the Dockerfile.
func pulledServices(p *types.Project) []string {
	var pulled func(name string) bool
	pulled = func(name string) bool {
		s := p.Services[name]
		if s.Build != nil {
			return false
		}
		if _, unavailable := unavailableImages[s.Image]; unavailable {
			return false
		}
		for dep := range s.DependsOn {
			if !pulled(dep) {
				return false
			}
		}
		return true
	}
	var names []string
	for _, name := range p.ServiceNames() {
		if inProfile(p.Services[name], mainStack) && pulled(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
