package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// AnnotationTag is on every annotation the load generator pushes; the
// lockstep dashboard shows Grafana's annotations with this tag.
const AnnotationTag = "lockstep"

// annotateTimeout bounds one annotation POST, so an unreachable Grafana
// delays the walk by at most this much per stage run.
const annotateTimeout = 5 * time.Second

// grafanaAnnotation is the body of Grafana's POST /api/annotations: a
// region from Time to TimeEnd, in Unix milliseconds.
type grafanaAnnotation struct {
	Time    int64    `json:"time"`
	TimeEnd int64    `json:"timeEnd"`
	Tags    []string `json:"tags"`
	Text    string   `json:"text"`
}

// annotator pushes one Grafana annotation per stage run, authenticated by
// the token as a bearer token (a service account's) when there is one,
// else by the URL's user as basic auth.
type annotator struct {
	endpoint string // {url}/api/annotations without the user
	user     *url.Userinfo
	token    string
	client   *http.Client
}

// newAnnotator parses Grafana's base URL; an empty one gives a nil
// annotator, which annotates nothing.
func newAnnotator(grafanaURL, token string) (*annotator, error) {
	if grafanaURL == "" {
		return nil, nil
	}
	u, err := url.Parse(grafanaURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("loadgen: Grafana URL %q: want http(s)://[user:password@]host[:port]", redactURL(grafanaURL))
	}
	a := &annotator{user: u.User, token: token, client: &http.Client{Timeout: annotateTimeout}}
	u.User = nil
	a.endpoint = strings.TrimSuffix(u.String(), "/") + "/api/annotations"
	return a, nil
}

// redactURL hides a password in a URL that may not parse.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable)"
}

// annotate posts the region of one stage run.
func (a *annotator) annotate(ctx context.Context, row *report.StageRun, start, end time.Time) error {
	text := fmt.Sprintf("%s: %d sales, %.0f sales/s, oversold %d, consistent %t",
		row.Stage, row.Sales, row.SalesPerSec, row.Oversold, row.Consistent)
	if row.Error != "" {
		text += ", error: " + row.Error
	}
	body, err := json.Marshal(grafanaAnnotation{
		Time: start.UnixMilli(), TimeEnd: end.UnixMilli(),
		Tags: []string{AnnotationTag, row.Stage}, Text: text,
	})
	if err != nil {
		return fmt.Errorf("encode annotation: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("annotation request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch {
	case a.token != "":
		req.Header.Set("Authorization", "Bearer "+a.token)
	case a.user != nil:
		password, _ := a.user.Password()
		req.SetBasicAuth(a.user.Username(), password)
	}
	res, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("post annotation: %w", err)
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("post annotation: %s: %s", res.Status, bytes.TrimSpace(answer))
	}
	return nil
}
