package qos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// maxReading bounds what is read of one /proc or cgroup file: the files
// read here are a line or two.
const maxReading = 4 << 10

// loadAvg is the first three fields of /proc/loadavg.
type loadAvg struct {
	Load1, Load5, Load15 float64
}

// parseLoadAvg reads /proc/loadavg: "0.14 0.31 0.36 1/89 3920".
func parseLoadAvg(r io.Reader) (loadAvg, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxReading))
	if err != nil {
		return loadAvg{}, err
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 {
		return loadAvg{}, fmt.Errorf("loadavg %q: want at least three load averages", strings.TrimSpace(string(b)))
	}
	var loads [3]float64
	for i := range loads {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return loadAvg{}, fmt.Errorf("loadavg %q: field %d %q is not a load average", strings.TrimSpace(string(b)), i+1, fields[i])
		}
		loads[i] = v
	}
	return loadAvg{Load1: loads[0], Load5: loads[1], Load15: loads[2]}, nil
}

// psiLine is one line of a PSI file: the share of wall time (percent) in
// which some (or all) non-idle tasks stalled, over 10 s, 60 s and 300 s.
type psiLine struct {
	Avg10, Avg60, Avg300 float64
	Total                uint64 // microseconds stalled, ever
}

// psi is one PSI file (/proc/pressure/cpu, a cgroup's memory.pressure).
// Full is nil where the file has no "full" line (cpu before Linux 5.13).
type psi struct {
	Some psiLine
	Full *psiLine
}

// parsePSI reads a PSI file:
//
//	some avg10=0.39 avg60=2.54 avg300=3.45 total=935888198
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// Keys it does not know are skipped: the kernel may add some.
func parsePSI(r io.Reader) (psi, error) {
	var out psi
	haveSome := false
	sc := bufio.NewScanner(io.LimitReader(r, maxReading))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		line, err := parsePSILine(fields[1:])
		if err != nil {
			return psi{}, fmt.Errorf("pressure line %q: %w", sc.Text(), err)
		}
		switch fields[0] {
		case "some":
			out.Some, haveSome = line, true
		case "full":
			out.Full = &line
		default:
			return psi{}, fmt.Errorf("pressure line %q: want some or full", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return psi{}, err
	}
	if !haveSome {
		return psi{}, errors.New("pressure: no some line")
	}
	return out, nil
}

func parsePSILine(fields []string) (psiLine, error) {
	var line psiLine
	seen := map[string]bool{}
	for _, field := range fields {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return psiLine{}, fmt.Errorf("field %q: want key=value", field)
		}
		if key == "total" {
			total, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return psiLine{}, fmt.Errorf("total %q is not a count", value)
			}
			line.Total, seen[key] = total, true
			continue
		}
		var avg *float64
		switch key {
		case "avg10":
			avg = &line.Avg10
		case "avg60":
			avg = &line.Avg60
		case "avg300":
			avg = &line.Avg300
		default:
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || v < 0 || v > 100 || math.IsNaN(v) {
			return psiLine{}, fmt.Errorf("%s %q is not a percentage", key, value)
		}
		*avg, seen[key] = v, true
	}
	for _, key := range []string{"avg10", "avg60", "avg300", "total"} {
		if !seen[key] {
			return psiLine{}, fmt.Errorf("no %s", key)
		}
	}
	return line, nil
}

// readFile opens path and parses it; errors name the path.
func readFile[T any](path string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}
