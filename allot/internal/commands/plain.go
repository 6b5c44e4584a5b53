package commands

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v3"
)

// The command-line parser and the API's name checks word their errors for
// programmers ("strconv.ParseUint: parsing \"abc\": invalid syntax",
// `Required flag "resources" not set`, a regular expression). This file
// says the same in the words of the flags and of the guide.

var (
	// urfave's error for a value its flag could not parse.
	badFlagValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): `)
	// urfave's error for required flags left out.
	missingFlags = regexp.MustCompile(`^Required flags? "(.*)" not set$`)
)

// flagMeanings say what a number flag counts, where "a whole number" alone
// would leave the user guessing.
var flagMeanings = map[string]string{
	"if-match": "a version (a whole number)",
	"since":    "an audit index (a whole number)",
}

// plainUsage words a parse error of cmd's command line for the user.
func plainUsage(cmd *cli.Command, err error) string {
	msg := err.Error()
	if m := badFlagValue.FindStringSubmatch(msg); m != nil {
		value, name := m[1], m[2]
		return fmt.Sprintf("-%s wants %s, not %q", name, wants(cmd, name), value)
	}
	if m := missingFlags.FindStringSubmatch(msg); m != nil {
		names := strings.Split(m[1], ", ")
		for i, n := range names {
			names[i] = "-" + n
		}
		return fmt.Sprintf("%s needs %s", strings.TrimPrefix(cmd.FullName(), "allot "), andList(names))
	}
	return msg
}

// wants says what kind of value the flag called name takes.
func wants(cmd *cli.Command, name string) string {
	if meaning, ok := flagMeanings[name]; ok {
		return meaning
	}
	for _, c := range cmd.Lineage() {
		for _, f := range c.Flags {
			if !hasName(f, name) {
				continue
			}
			switch f.(type) {
			case *cli.Uint64Flag, *cli.IntFlag:
				return "a whole number"
			case *cli.FloatFlag:
				return "a number"
			case *cli.DurationFlag:
				return "a duration with its unit (500ms, 10s, 2m)"
			case *cli.BoolFlag:
				return "true or false"
			}
		}
	}
	return "another value"
}

func hasName(f cli.Flag, name string) bool {
	for _, n := range f.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// andList writes "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// The API's name rules in words; namesMustMatch finds where its errors give
// the regular expression instead.
const (
	roleRule     = "a path of segments of letters, digits, _ . and - joined by / (each beginning with a letter, digit or _), e.g. eng/ml"
	nameRule     = "letters, digits and _ . : @ - (beginning with a letter, digit or _)"
	resourceRule = "lower-case letters, digits and _ (beginning with a letter), e.g. cpus or mem"
)

var namesMustMatch = regexp.MustCompile(`must match \^\S*\$`)

// plainName replaces the regular expression of a name check's error with
// rule.
func plainName(msg, rule string) string {
	return namesMustMatch.ReplaceAllLiteralString(msg, "must be "+rule)
}
