// Package localapi is agentd's own HTTP API (API.md, "Agent API"):
// GET /v1/health, GET /v1/containers and GET /metrics, answered in the
// error format of every allot API.
package localapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/allot/allot/agentd/internal/containerizer"
	"github.com/allot/allot/masterd/api"
)

// Source is what the API shows: the agent's containers and who owns them.
type Source interface {
	Containerizer() *containerizer.Containerizer
	TaskOf(containerID string) (api.AgentTask, bool)
}

// Handler serves the local API.
type Handler struct {
	src      Source
	registry *prometheus.Registry
	mux      *http.ServeMux

	mu      sync.Mutex
	samples map[string]cpuSample // by container id, for usage.cpus
}

type cpuSample struct {
	at    time.Time
	nanos uint64
}

// New returns the local API for src, with registry's metrics at /metrics.
func New(src Source, registry *prometheus.Registry) *Handler {
	h := &Handler{src: src, registry: registry, mux: http.NewServeMux(), samples: map[string]cpuSample{}}
	h.mux.HandleFunc("/v1/health", h.health)
	h.mux.HandleFunc("/v1/containers", h.containers)
	h.mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		e := api.Errorf(api.CodeInvalidArgument, "method %s is not allowed: the agent's API is read-only (GET)", api.EchoName(r.Method))
		e.Status = http.StatusMethodNotAllowed
		writeError(w, e)
		return
	}
	if p := r.URL.Path; p == "" || path.Clean(p) != p {
		// Answered here, not redirected as http.ServeMux would.
		writeError(w, api.Errorf(api.CodeInvalidArgument, "path %q is not canonical (empty, . or .. segments)", api.EchoName(p)))
		return
	}
	if r.URL.RawQuery != "" {
		names := slices.Sorted(maps.Keys(r.URL.Query()))
		what := fmt.Sprintf("query %q", api.EchoName(r.URL.RawQuery))
		if len(names) > 0 {
			what = fmt.Sprintf("query parameter %q", api.EchoName(names[0]))
		}
		writeError(w, api.Errorf(api.CodeInvalidArgument, "unknown %s: the agent's endpoints take no parameters", what))
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		writeError(w, api.Errorf(api.CodeNotFound, "no such endpoint %q; the agent serves /v1/health, /v1/containers and /metrics", api.EchoName(r.URL.Path)))
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]string{"status": "ok"})
}

func (h *Handler) containers(w http.ResponseWriter, _ *http.Request) {
	ctz := h.src.Containerizer()
	live := ctz.Containers()
	now := time.Now()
	out := api.ContainerList{Containers: make([]api.Container, 0, len(live))}
	seen := map[string]bool{}
	for _, c := range live {
		seen[c.ID] = true
		item := api.Container{
			ContainerID: c.ID,
			Cgroup:      c.Cgroup,
			Sandbox:     c.Sandbox,
			Pids:        []int{},
			OOMScoreAdj: c.OOMScoreAdj,
			StartedAt:   c.StartedAt.UTC(),
			Requests:    api.Resources{},
			Limits:      api.Limits{},
		}
		if t, ok := h.src.TaskOf(c.ID); ok {
			item.TaskID, item.FrameworkID, item.ExecutorID, item.State = t.Task.TaskID, t.FrameworkID, t.ExecutorID, t.State
			item.Requests, item.Revocable = t.Task.Resources, t.Task.Revocable
			if t.Task.Limits != nil {
				item.Limits = t.Task.Limits
			}
		}
		if pids, err := ctz.Pids(c.ID); err == nil {
			item.Pids = pids
		}
		if st, err := ctz.Stats(c.ID); err == nil {
			item.Usage = api.ContainerUsage{
				Cpus: api.RoundScalar(h.cpus(c, st.CPUUsageNanos, now)),
				Mem:  api.RoundScalar(float64(st.MemoryUsageBytes) / (1 << 20)),
			}
		}
		out.Containers = append(out.Containers, item)
	}
	h.forget(seen)
	sort.Slice(out.Containers, func(i, j int) bool { return out.Containers[i].ContainerID < out.Containers[j].ContainerID })
	writeJSON(w, out)
}

// cpus is the cores a container used since the previous sample, if one was
// taken within a minute, else since it started.
func (h *Handler) cpus(c containerizer.Container, nanos uint64, now time.Time) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	prev, ok := h.samples[c.ID]
	h.samples[c.ID] = cpuSample{at: now, nanos: nanos}
	if !ok || now.Sub(prev.at) > time.Minute || now.Sub(prev.at) < 10*time.Millisecond || nanos < prev.nanos {
		prev = cpuSample{at: c.StartedAt}
	}
	elapsed := now.Sub(prev.at)
	if elapsed <= 0 {
		return 0
	}
	return float64(nanos-prev.nanos) / float64(elapsed.Nanoseconds())
}

// forget drops the samples of containers that are gone.
func (h *Handler) forget(live map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.samples {
		if !live[id] {
			delete(h.samples, id)
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *api.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(cmp.Or(e.Status, e.HTTPStatus()))
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: e})
}
