package api

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// DefaultRole is the unreserved role every framework may use.
const DefaultRole = "*"

var (
	rolePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$`)
	// Reservation names, principals and agent names share one conservative syntax
	// so that they are safe in URLs, logs and Terraform import IDs.
	namePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:@-]*$`)
)

const maxNameLength = 256

// ValidateRole checks a role name such as "eng/ml". The default role "*"
// cannot carry quota or weight, so it is rejected here.
func ValidateRole(role string) error {
	if len(role) > maxNameLength {
		return fmt.Errorf("role is longer than %d characters", maxNameLength)
	}
	if !rolePattern.MatchString(role) {
		return fmt.Errorf("role %q must match %s", role, rolePattern)
	}
	for _, part := range strings.Split(role, "/") {
		if part == "." || part == ".." {
			return fmt.Errorf("role %q: %q is not a valid path component", role, part)
		}
	}
	return nil
}

// ValidateName checks a reservation name, principal or agent name.
func ValidateName(kind, name string) error {
	if len(name) > maxNameLength {
		return fmt.Errorf("%s is longer than %d characters", kind, maxNameLength)
	}
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%s %q must match %s", kind, name, namePattern)
	}
	return nil
}

// EchoName is name as an error message may repeat it: whole when it is no
// longer than a valid name can be, else its first bytes and its length, so
// that an answer never echoes an arbitrary amount of its request.
func EchoName(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	const shown = 64
	cut := shown
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(name[:cut], ""), len(name))
}

// ParentRole returns the parent of "a/b/c" ("a/b") and false for a top-level role.
func ParentRole(role string) (string, bool) {
	i := strings.LastIndexByte(role, '/')
	if i < 0 {
		return "", false
	}
	return role[:i], true
}

// IsDescendant reports whether role lies strictly below ancestor.
func IsDescendant(role, ancestor string) bool {
	return len(role) > len(ancestor) && strings.HasPrefix(role, ancestor) && role[len(ancestor)] == '/'
}

// CompareNatural compares a and b as strings, except that runs of digits
// compare as numbers: ids as people number them (m2 before m10).
func CompareNatural(a, b string) int {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da != "" && db != "" {
			na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitsPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
