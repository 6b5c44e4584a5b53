package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/allot/allot/masterd/api"
)

// A route's query parameters are declared with the route (see routes): any
// other parameter, a parameter given twice or a value its parser refuses is a
// 400 before the handler runs, so that a misspelt ?dryrun=true can never turn
// a dry run into a real write. Handlers read their parameters with the
// helpers below, which cannot fail once the route's check passed.

// param is one query parameter a route accepts.
type param struct {
	name string
	// check says what is wrong with a value ("" when it is good).
	check func(value string) string
}

var (
	paramStale  = param{"stale", checkBool}
	paramDryRun = param{"dry_run", checkBool}
	// paramAfter is the Raft index after which /v1/audit starts.
	paramAfter = param{"after", checkIndex}
	// paramLimit caps how many audit entries one answer holds.
	paramLimit = param{"limit", checkLimit}
	// paramState filters /v1/tasks by a comma-separated list of states.
	paramState = param{"state", checkTaskStates}
	// paramRole and paramAgent filter /v1/tasks by role and by agent id.
	paramRole  = param{"role", checkRoleName}
	paramAgent = param{"agent", checkAgentID}
)

// endpoint is one method of a route: its handler, the query parameters it
// accepts and who may call it (auth.go).
type endpoint struct {
	serve  http.HandlerFunc
	params []param
	auth   auth
}

// reads is a read of the replicated state: it takes ?stale=true.
func reads(h http.HandlerFunc, extra ...param) endpoint {
	return endpoint{serve: h, params: append([]param{paramStale}, extra...)}
}

// writes is a PUT, POST or DELETE: it takes ?dry_run=true.
func writes(h http.HandlerFunc) endpoint { return endpoint{serve: h, params: []param{paramDryRun}} }

// takes is an endpoint with exactly the given parameters (none for most).
func takes(h http.HandlerFunc, params ...param) endpoint { return endpoint{serve: h, params: params} }

// checkQuery refuses a request whose query string the endpoint does not
// accept.
func checkQuery(r *http.Request, accepted []param) *api.Error {
	if r.URL.RawQuery == "" {
		return nil
	}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return api.Errorf(api.CodeInvalidArgument, "the query string is malformed: %v", err)
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		i := slices.IndexFunc(accepted, func(p param) bool { return p.name == name })
		if i < 0 {
			return api.Errorf(api.CodeInvalidArgument, "unknown query parameter %q on %s %s (%s)",
				api.EchoName(name), r.Method, api.EchoName(r.URL.Path), acceptedList(accepted)).
				WithDetails(map[string]any{"parameter": api.EchoName(name)})
		}
		if n := len(values[name]); n > 1 {
			return api.Errorf(api.CodeInvalidArgument, "query parameter %s is given %d times: give it once", name, n).
				WithDetails(map[string]any{"parameter": name})
		}
		if problem := accepted[i].check(values[name][0]); problem != "" {
			return api.Errorf(api.CodeInvalidArgument, "query parameter %s: %s", name, problem).
				WithDetails(map[string]any{"parameter": name})
		}
	}
	return nil
}

func acceptedList(accepted []param) string {
	if len(accepted) == 0 {
		return "it takes no query parameters"
	}
	names := make([]string, len(accepted))
	for i, p := range accepted {
		names[i] = p.name
	}
	return "it takes " + strings.Join(names, ", ")
}

func checkBool(v string) string {
	if v != "true" && v != "false" {
		return fmt.Sprintf("want true or false, not %q", api.EchoName(v))
	}
	return ""
}

func checkIndex(v string) string {
	if _, err := strconv.ParseUint(v, 10, 64); err != nil {
		return fmt.Sprintf("want a Raft index (a whole number, 0 or more), not %q", api.EchoName(v))
	}
	return ""
}

func checkLimit(v string) string {
	if n, err := strconv.Atoi(v); err != nil || n < 1 {
		return fmt.Sprintf("want a whole number of entries, 1 or more, not %q", api.EchoName(v))
	}
	return ""
}

func checkRoleName(v string) string {
	if v == "*" {
		return ""
	}
	if err := api.ValidateRole(v); err != nil {
		return err.Error()
	}
	return ""
}

func checkAgentID(v string) string {
	if err := api.ValidateName("agent id", v); err != nil {
		return err.Error()
	}
	return ""
}

func checkTaskStates(v string) string {
	for _, state := range strings.Split(v, ",") {
		if !slices.Contains(api.TaskStates, state) {
			return fmt.Sprintf("%q is not a task state (want a comma-separated list of %s)",
				api.EchoName(state), strings.Join(api.TaskStates, ", "))
		}
	}
	return ""
}

// Readers of parameters that checkQuery has validated.

// flag is a boolean parameter, false when absent.
func flag(r *http.Request, p param) bool { return r.URL.Query().Get(p.name) == "true" }

// number is a whole-number parameter, 0 when absent.
func number(r *http.Request, p param) uint64 {
	n, _ := strconv.ParseUint(r.URL.Query().Get(p.name), 10, 64)
	return n
}

// list is a comma-separated parameter, nil when absent.
func list(r *http.Request, p param) []string {
	if v := r.URL.Query().Get(p.name); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}
