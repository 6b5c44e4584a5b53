package commands

import (
	"slices"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// Servers come out by id, numbers compared as numbers, whatever the order
// the API lists them in.
func TestSortServers(t *testing.T) {
	var servers []api.Server
	for _, id := range []string{"m1", "m3", "m10", "m2", "b", "a", "m02"} {
		servers = append(servers, api.Server{ID: id})
	}
	sortServers(servers)
	var got []string
	for _, s := range servers {
		got = append(got, s.ID)
	}
	if want := []string{"a", "b", "m1", "m2", "m02", "m3", "m10"}; !slices.Equal(got, want) {
		t.Errorf("sorted %q, want %q", got, want)
	}
}
