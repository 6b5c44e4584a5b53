package allocator

import (
	"testing"
)

func TestDebugCounts(t *testing.T) {
	var slackOffers, lentOffers, overSlack, overLent, picks, revTasks, limitOver int
	for seed := 1; seed <= 100; seed++ {
		s := newSim(t, int64(seed))
		for i := 0; i < 50; i++ {
			for j := s.rng.Intn(3); j > 0; j-- {
				s.event()
			}
			s.cycle()
			for _, o := range s.offers {
				if o.Pieces[0].Throttleable {
					slackOffers++
				} else if o.Pieces[0].Revocable {
					lentOffers++
				}
			}
			for _, o := range s.a.Overlent() {
				if o.Throttleable {
					overSlack++
				} else {
					overLent++
				}
				picks += len(RescindRevocable(s.offers, o))
			}
			l := s.ledger()
			for r := range s.lending {
				for k, v := range l.lent[r] {
					if lim, _ := s.lendingLimit(r, k); v > lim {
						limitOver++
					}
				}
			}
			s.rescindOverlent()
			s.respond()
			for _, tk := range s.tasks {
				if tk.Pieces[0].Revocable {
					revTasks++
				}
			}
		}
	}
	t.Logf("slack offers %d lent offers %d overlent slack %d lent %d picks %d revocable task-cycles %d limit-over %d", slackOffers, lentOffers, overSlack, overLent, picks, revTasks, limitOver)
}
