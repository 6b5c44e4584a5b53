package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// TestClusterTotalsOnFollowers: a follower answers GET /v1/cluster with the
// leader's live totals (allocated, offered, revocable, revocable_allocated)
// and the reservations it holds itself; with ?stale=true the live totals
// are null and the reserved total stays.
func TestClusterTotalsOnFollowers(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithArgs("-test-hooks"))
	leader := waitLeader(t, c)
	addr := c.Address(leader)
	aclMust(t, "PUT", addr+"/v1/test/agents/node-1", "", `{"hostname": "node-1", "resources": {"cpus": 8, "mem": 8192}}`, nil)
	aclMust(t, "PUT", addr+"/v1/reservations/db-1", "", `{"agent": "node-1", "role": "db", "resources": {"cpus": 2, "mem": 1024}}`, nil)
	reserved := api.Resources{"cpus": 2, "mem": 1024}

	var lead api.Cluster
	aclMust(t, "GET", addr+"/v1/cluster", "", "", &lead)
	if !reflect.DeepEqual(lead.Reserved, reserved) || lead.Offered == nil || lead.Revocable == nil || lead.RevocableAllocated == nil {
		t.Fatalf("the leader's totals: reserved %v, offered %v, revocable %v, revocable_allocated %v",
			lead.Reserved, lead.Offered, lead.Revocable, lead.RevocableAllocated)
	}
	for _, i := range c.Followers() {
		var info api.Cluster
		eventually(t, c.ID(i)+" to hold the reservation", func() error {
			a := aclDo(t, "GET", c.Address(i)+"/v1/cluster", "", "")
			if err := json.Unmarshal(a.body, &info); err != nil {
				return err
			}
			if !reflect.DeepEqual(info.Reserved, reserved) {
				return fmt.Errorf("reserved %v, want %v", info.Reserved, reserved)
			}
			return nil
		})
		if !reflect.DeepEqual([]api.Resources{info.Allocated, info.Offered, info.Revocable, info.RevocableAllocated},
			[]api.Resources{lead.Allocated, lead.Offered, lead.Revocable, lead.RevocableAllocated}) {
			t.Errorf("%s: live totals %v %v %v %v, the leader's %v %v %v %v", c.ID(i), info.Allocated, info.Offered, info.Revocable,
				info.RevocableAllocated, lead.Allocated, lead.Offered, lead.Revocable, lead.RevocableAllocated)
		}
		var stale api.Cluster
		aclMust(t, "GET", c.Address(i)+"/v1/cluster?stale=true", "", "", &stale)
		if stale.Allocated != nil || stale.Offered != nil || stale.Revocable != nil || stale.RevocableAllocated != nil ||
			!reflect.DeepEqual(stale.Reserved, reserved) {
			t.Errorf("%s with ?stale=true: %+v, want the live totals null and reserved %v", c.ID(i), stale, reserved)
		}
	}
}
