package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/strictjson"
)

// maxBodyBytes is the largest request body any endpoint accepts.
const maxBodyBytes = 1 << 20

// requestRules are the rules of every request body beyond JSON's own (see
// README, "Request bodies"). They hold at the API only: the Raft log keeps
// what older servers accepted, and replaying it must not refuse it.
var requestRules = strictjson.Options{Checks: map[reflect.Type]strictjson.Check{
	reflect.TypeFor[api.Resources](): checkResourceMap,
	reflect.TypeFor[api.Limits]():    checkLimitMap,
}}

// decodeBody reads and decodes the request body of every endpoint, the
// scheduler's and the agents' included: one JSON object, strictly (see
// strictjson), within maxBodyBytes and the time the middleware allows.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) *api.Error {
	if r.ContentLength > maxBodyBytes {
		return api.Errorf(api.CodePayloadTooLarge, "request body is %d bytes, more than the %d allowed", r.ContentLength, maxBodyBytes)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return api.Errorf(api.CodePayloadTooLarge, "request body is larger than the %d bytes allowed", maxBodyBytes)
		case errors.Is(err, os.ErrDeadlineExceeded):
			e := api.Errorf(api.CodeInvalidArgument, "the request body did not arrive in time (%d of %s bytes received)",
				len(data), contentLength(r))
			e.Status = http.StatusRequestTimeout
			return e
		}
		return api.Errorf(api.CodeInvalidArgument, "read request body: %v", err)
	}
	if err := strictjson.Decode(data, v, requestRules); err != nil {
		e := api.Errorf(api.CodeInvalidArgument, "%v", err)
		var bad *strictjson.Error
		if errors.As(err, &bad) && bad.Path != "" {
			e = e.WithDetails(map[string]any{"field": bad.Path})
		}
		return e
	}
	return nil
}

func contentLength(r *http.Request) string {
	if r.ContentLength < 0 {
		return "an unknown number of"
	}
	return strconv.FormatInt(r.ContentLength, 10)
}

// checkResourceMap bounds the names of a resource map and refuses an amount
// that is not 0 but would be stored as 0: the fixed point of 0.001 would turn
// a request for a little into a request for nothing.
func checkResourceMap(path string, v reflect.Value) error {
	r := v.Interface().(api.Resources)
	if len(r) > api.MaxResourceNames {
		return &strictjson.Error{Path: path, Message: "names " + strconv.Itoa(len(r)) + " resources; at most " +
			strconv.Itoa(api.MaxResourceNames) + " are allowed"}
	}
	for _, name := range r.Names() {
		if e := checkAmount(strictjson.Join(path, name), r[name]); e != nil {
			return e
		}
	}
	return nil
}

// checkLimitMap applies the same rules to task limits, and reads -0 as 0 (a
// limit decodes itself, so the decoder's own -0 rule does not reach it).
func checkLimitMap(path string, v reflect.Value) error {
	limits := v.Interface().(api.Limits)
	if len(limits) > api.MaxResourceNames {
		return &strictjson.Error{Path: path, Message: "names " + strconv.Itoa(len(limits)) + " resources; at most " +
			strconv.Itoa(api.MaxResourceNames) + " are allowed"}
	}
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l := limits[name]
		if l.Infinite {
			continue
		}
		if e := checkAmount(strictjson.Join(path, name), l.Value); e != nil {
			return e
		}
		if l.Value == 0 {
			limits[name] = api.Limit{}
		}
	}
	return nil
}

func checkAmount(path string, v float64) *strictjson.Error {
	if v != 0 && api.RoundScalar(v) == 0 {
		return &strictjson.Error{Path: path, Message: strconv.FormatFloat(v, 'f', -1, 64) +
			" is not 0 but rounds to 0: amounts are kept to 0.001, so send 0 or at least 0.001"}
	}
	return nil
}
