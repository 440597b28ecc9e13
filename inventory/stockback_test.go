package inventory

import (
	"os"
	"strings"
	"testing"
)

// Every script that gives units back announces it on StockBackChannel,
// which it names itself (asyncorders cannot import this package).
func TestGiveBackScriptsAnnounceStockBack(t *testing.T) {
	for _, path := range []string{
		"scripts/give_back.lua",
		"scripts/segment_give_back.lua",
		"scripts/segment_undo.lua",
		"../asyncorders/scripts/compensate.lua",
	} {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := "redis.call('PUBLISH', '" + StockBackChannel + "', KEYS[1])"; !strings.Contains(string(src), want) {
			t.Errorf("%s gives units back without %s", path, want)
		}
	}
}
