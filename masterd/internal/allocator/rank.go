package allocator

import (
	"slices"
	"sort"
)

// DRF orders break ties by name (a framework's id, a role's name), and a
// cycle compares entries of equal share all the time: every framework of a
// role starts at zero, and identical agents give frameworks identical
// shares. nameRanks numbers the names in sorted order, so that a tie costs
// two integers compared instead of two strings.
//
// Entries are numbered by their place in the sorted list; adding or removing
// one renumbers those after it. Ranks keep their relative order through
// that, so lists sorted by them stay sorted.
type nameRanks[T any] struct {
	list    []T
	name    func(T) string
	setRank func(T, int)
}

func (n *nameRanks[T]) search(name string) int {
	return sort.Search(len(n.list), func(j int) bool { return n.name(n.list[j]) >= name })
}

func (n *nameRanks[T]) add(e T) {
	i := n.search(n.name(e))
	n.list = slices.Insert(n.list, i, e)
	n.renumber(i)
}

func (n *nameRanks[T]) remove(e T) {
	i := n.search(n.name(e))
	if i < len(n.list) && n.name(n.list[i]) == n.name(e) {
		n.list = slices.Delete(n.list, i, i+1)
		n.renumber(i)
	}
}

func (n *nameRanks[T]) renumber(from int) {
	for j := from; j < len(n.list); j++ {
		n.setRank(n.list[j], j)
	}
}

func newFrameworkRanks() nameRanks[*framework] {
	return nameRanks[*framework]{
		name: func(fw *framework) string { return fw.id },
		setRank: func(fw *framework, i int) {
			fw.rank = i
			for _, fr := range fw.roles {
				fr.rank = i
			}
		},
	}
}

func newRoleRanks() nameRanks[*role] {
	return nameRanks[*role]{
		name:    func(r *role) string { return r.name },
		setRank: func(r *role, i int) { r.rank = i },
	}
}
