package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

func TestResourcesAndLimits(t *testing.T) {
	tests := map[string]struct {
		got, want string
	}{
		"resources in name order": {Resources(api.Resources{"mem": 1024, "cpus": 2.5, "disk": 0}), "cpus:2.5 disk:0 mem:1024"},
		"no exponent for large":   {Resources(api.Resources{"mem": 1500000}), "mem:1500000"},
		"fractions kept":          {Resources(api.Resources{"cpus": 0.001}), "cpus:0.001"},
		"nil resources":           {Resources(nil), None},
		"empty resources":         {Resources(api.Resources{}), None},
		"infinite limit":          {Limits(api.Limits{"mem": {Infinite: true}, "cpus": {Value: 2}}), "cpus:2 mem:" + Infinity},
		"no limits":               {Limits(nil), None},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestTableAlignsColumnsAndFillsEmptyCells(t *testing.T) {
	var b bytes.Buffer
	tab := NewTable(&b, "ROLE", "WEIGHT", "LIMITS")
	tab.Row("eng/ml", "2", "cpus:4")
	tab.Row("db", "", "a\tb")
	if err := tab.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "ROLE    WEIGHT  LIMITS\n" +
		"eng/ml  2       cpus:4\n" +
		"db      -       a b\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestJSONIsTheAPIEncoding(t *testing.T) {
	var b bytes.Buffer
	task := api.Task{TaskID: "t<1>", Limits: api.Limits{"mem": {Infinite: true}}}
	if err := JSON(&b, task); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"mem": "Infinity"`) || !strings.Contains(b.String(), `"t<1>"`) {
		t.Errorf("JSON = %s, want the Infinity spelling and unescaped names", b.String())
	}
	var back api.Task
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || !back.Limits["mem"].Infinite {
		t.Errorf("decode back: %+v, %v", back, err)
	}
}

func TestDiff(t *testing.T) {
	tests := map[string]struct {
		before, after string
		want          string
	}{
		"update": {
			`{"role":"eng","guarantees":{"cpus":2},"limits":{},"version":3}`,
			`{"role":"eng","guarantees":{"cpus":4,"mem":1024},"limits":{},"version":9}`,
			"guarantees.cpus: 2→4, guarantees.mem: -→1024",
		},
		"create": {
			`null`,
			`{"name":"db1","agent":"node-1","resources":{"cpus":1},"version":4}`,
			"+ agent=node-1 name=db1 resources.cpus=1",
		},
		"delete": {
			`{"principal":"spark","qps":10,"version":5}`,
			``,
			"- principal=spark qps=10",
		},
		"an empty object is an absent one": {
			`{"role":"eng","guarantees":{},"limits":{"cpus":8},"version":3}`,
			`{"role":"eng","limits":{},"version":4}`,
			"limits.cpus: 8→-",
		},
		"only empty objects moved": {
			`{"role":"eng","guarantees":{},"version":3}`,
			`{"role":"eng","limits":{},"version":4}`,
			"(no change)",
		},
		"a creation leaves empty objects out": {
			`null`,
			`{"role":"eng","guarantees":{},"limits":{"cpus":4},"version":4}`,
			"+ limits.cpus=4 role=eng",
		},
		"an empty lending limit is not an absent one": {
			`{"role":"eng","weight":1}`,
			`{"role":"eng","weight":1,"lending_limit":{}}`,
			"lending_limit: -→{}",
		},
		"arrays compact": {
			`{"policies":["a"]}`,
			`{"policies":["a","b"]}`,
			`policies: ["a"]→["a","b"]`,
		},
		"only the version moved": {
			`{"role":"eng","version":1}`,
			`{"role":"eng","version":2}`,
			"(no change)",
		},
		"nothing": {``, `null`, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Diff(json.RawMessage(tc.before), json.RawMessage(tc.after)); got != tc.want {
				t.Errorf("Diff = %q, want %q", got, tc.want)
			}
		})
	}
}

func BenchmarkDiff(b *testing.B) {
	before := json.RawMessage(`{"role":"eng/ml","guarantees":{"cpus":2,"mem":1024},"limits":{"cpus":4},"version":3}`)
	after := json.RawMessage(`{"role":"eng/ml","guarantees":{"cpus":4,"mem":1024},"limits":{"cpus":8,"mem":4096},"version":9}`)
	b.ReportAllocs()
	for b.Loop() {
		Diff(before, after)
	}
}

// BenchmarkTaskTable renders a task list as `allot task list` does: one
// row of requests and limits per task.
func BenchmarkTaskTable(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			requests := api.Resources{"cpus": 0.5, "mem": 256}
			limits := api.Limits{"cpus": {Value: 2}, "mem": {Infinite: true}}
			for b.Loop() {
				t := NewTable(io.Discard, "ID", "STATE", "REQUESTS", "LIMITS")
				for i := 0; i < n; i++ {
					t.Row("task-"+strconv.Itoa(i), "TASK_RUNNING", Resources(requests), Limits(limits))
				}
				if err := t.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
