package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
)

// scrapeMetrics reads a replica's /metrics and hands each sample to f: the
// metric's name, its labels as written between the braces ("" for none),
// and its value. Comments and lines that are not a sample are passed over.
func scrapeMetrics(ctx context.Context, client *http.Client, base string, f func(name, labels string, value float64)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:i], "{")
		f(name, strings.TrimSuffix(labels, "}"), v)
	}
	return lines.Err()
}
