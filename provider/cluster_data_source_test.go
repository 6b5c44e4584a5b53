package provider

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// TestAccClusterDataSource_readRightAfterLeaderKilled: the leader is killed
// just before Terraform reads data "allot_cluster", while the followers
// still name it as their leader (they notice its silence only after their
// heartbeat timeout). The read must name the leader the cluster elects
// next, never the dead one.
func TestAccClusterDataSource_readRightAfterLeaderKilled(t *testing.T) {
	c := ownCluster(t, 3)
	var (
		once   sync.Once
		killed string
	)
	killLeader := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			leader, err := c.WaitLeader(ctx)
			if err != nil {
				t.Errorf("wait for the leader: %v", err)
				return
			}
			if err := c.Kill(leader); err != nil {
				t.Errorf("kill the leader: %v", err)
				return
			}
			killed = c.ID(leader)
			t.Logf("killed the leader %s right before the read", killed)
		})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: hookedFactories(protocolHooks{beforeRead: func(string) { killLeader() }}),
		Steps: []resource.TestStep{{
			Config: c.providerConfig() + `data "allot_cluster" "this" {}`,
			Check: func(s *terraform.State) error {
				if killed == "" {
					return fmt.Errorf("the leader was never killed")
				}
				attrs := s.RootModule().Resources["data.allot_cluster.this"].Primary.Attributes
				named := attrs["leader.id"]
				if named == killed {
					return fmt.Errorf("data.allot_cluster names the killed server %s as the leader", killed)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				leader, err := c.WaitLeader(ctx)
				if err != nil {
					return err
				}
				if named != c.ID(leader) {
					return fmt.Errorf("data.allot_cluster names leader %q; the live servers agree on %s", named, c.ID(leader))
				}
				for i := 0; i < c.N(); i++ {
					id := attrs[fmt.Sprintf("servers.%d.id", i)]
					if want := fmt.Sprint(id == named); attrs[fmt.Sprintf("servers.%d.leader", i)] != want {
						return fmt.Errorf("servers[%d] (%s) has leader = %s, want %s", i, id, attrs[fmt.Sprintf("servers.%d.leader", i)], want)
					}
				}
				return nil
			},
		}},
	})
}
