package api

import "time"

// The agent protocol: how agentd talks to the leading master. It is internal
// (API.md names no part of it) but shared by agentd, the simulated agents of
// tests and benchmarks, and masterd, so it lives here with the other wire
// types.
//
// It mirrors the scheduler API. The agent always dials: POST /v1/agent with a
// REGISTER call answers a stream (application/x-ndjson, header
// Allot-Stream-Id) of AgentEvents that lasts as long as the session; every
// later call is its own POST carrying the agent id and the stream id and is
// answered 202. A follower answers REGISTER with 307 and the leader's
// address in Location.
//
// REGISTER is also re-registration: an agent that has an id (from an earlier
// REGISTERED) sends it with every task and executor it still runs, and the
// master rebuilds its view of the agent from that report; a new leader learns
// the cluster's tasks this way. An agent known by name but presenting another
// or no id is a new incarnation: the tasks of the old one are lost.
//
// Liveness: the agent sends HEARTBEAT every heartbeat_interval_seconds; a
// closed stream or no call for -agent-ping-timeout disconnects it.
//
// Status updates are at least once: the agent sends UPDATE with a fresh uuid
// and repeats it until an ACKNOWLEDGE event carries that uuid back; the
// master forwards the framework's acknowledgement.
//
// Oversubscription: an agent with a resource estimator sends
// UPDATE_OVERSUBSCRIBED with its latest estimate of the usage slack it can
// lend (resources allocated to its tasks and not used by them, less a safety
// margin), when it changed and at most every -oversubscribed-interval, and
// again after every REGISTERED. Each estimate replaces the previous one; an
// empty one withdraws the slack. The master offers it as revocable,
// throttleable resources. When the estimate falls below what revocable tasks
// hold, the agent's QoS controller, not the master, decides what to kill.

// AgentProtocolPath is the agent protocol's endpoint.
const AgentProtocolPath = "/v1/agent"

// SchedulerPath is the scheduler API's endpoint.
const SchedulerPath = "/v1/scheduler"

// Agent call types.
const (
	AgentCallRegister  = "REGISTER"
	AgentCallUpdate    = "UPDATE"
	AgentCallHeartbeat = "HEARTBEAT"
	// AgentCallUpdateOversubscribed reports the agent's usage slack.
	AgentCallUpdateOversubscribed = "UPDATE_OVERSUBSCRIBED"
)

// Agent event types.
const (
	AgentEventRegistered  = "REGISTERED"
	AgentEventLaunch      = "LAUNCH"
	AgentEventKill        = "KILL"
	AgentEventAcknowledge = "ACKNOWLEDGE"
	AgentEventHeartbeat   = "HEARTBEAT"
	AgentEventError       = "ERROR"
)

// AgentInfo describes an agent at REGISTER.
type AgentInfo struct {
	Name         string    `json:"name"`
	Hostname     string    `json:"hostname"`
	Resources    Resources `json:"resources"`
	Capabilities []string  `json:"capabilities,omitempty"`
}

// AgentExecutor is an executor an agent runs: the executor of a task group,
// holding its own resources beside its tasks'.
type AgentExecutor struct {
	FrameworkID string          `json:"framework_id"`
	ExecutorID  string          `json:"executor_id"`
	Role        string          `json:"role"`
	Allocation  []OfferResource `json:"allocation"`
}

// AgentTask is a task as the master tells an agent to run it and as the agent
// reports it when it re-registers.
type AgentTask struct {
	FrameworkID string `json:"framework_id"`
	// Role is the framework role the task's resources are allocated to.
	Role string   `json:"role"`
	Task TaskInfo `json:"task"`
	// ExecutorID names the task group executor the task runs under.
	ExecutorID string `json:"executor_id,omitempty"`
	// Allocation is where Task.Resources come from: the pieces of the offer
	// the task used (a role's reservation before unreserved resources).
	Allocation []OfferResource `json:"allocation"`
	// State is the task's latest state (re-registration only).
	State string `json:"state,omitempty"`
}

// Agent call bodies.
type (
	AgentRegister struct {
		AgentInfo AgentInfo       `json:"agent_info"`
		Tasks     []AgentTask     `json:"tasks,omitempty"`
		Executors []AgentExecutor `json:"executors,omitempty"`
	}
	AgentUpdate struct {
		FrameworkID string     `json:"framework_id"`
		Status      TaskStatus `json:"status"`
	}
	AgentHeartbeat struct{}
	// AgentUpdateOversubscribed is the estimator's latest estimate: the
	// revocable, throttleable resources the agent can lend now.
	AgentUpdateOversubscribed struct {
		Resources Resources `json:"resources"`
	}
)

// AgentCall is one request of the agent protocol.
type AgentCall struct {
	AgentID   string          `json:"agent_id,omitempty"`
	Type      string          `json:"type"`
	Register  *AgentRegister  `json:"register,omitempty"`
	Update    *AgentUpdate    `json:"update,omitempty"`
	Heartbeat *AgentHeartbeat `json:"heartbeat,omitempty"`

	UpdateOversubscribed *AgentUpdateOversubscribed `json:"update_oversubscribed,omitempty"`
}

// Agent event bodies.
type (
	AgentRegistered struct {
		AgentID                  string  `json:"agent_id"`
		HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds"`
	}
	// AgentLaunch starts tasks; with Executor it starts them as one task
	// group under that executor.
	AgentLaunch struct {
		FrameworkID string         `json:"framework_id"`
		Executor    *AgentExecutor `json:"executor,omitempty"`
		Tasks       []AgentTask    `json:"tasks"`
	}
	AgentKill struct {
		FrameworkID string `json:"framework_id"`
		TaskID      string `json:"task_id"`
	}
	AgentAcknowledge struct {
		FrameworkID string `json:"framework_id"`
		TaskID      string `json:"task_id"`
		UUID        string `json:"uuid"`
	}
)

// AgentEvent is one line of the agent's stream.
type AgentEvent struct {
	Type        string            `json:"type"`
	Registered  *AgentRegistered  `json:"registered,omitempty"`
	Launch      *AgentLaunch      `json:"launch,omitempty"`
	Kill        *AgentKill        `json:"kill,omitempty"`
	Acknowledge *AgentAcknowledge `json:"acknowledge,omitempty"`
	Error       *ErrorEvent       `json:"error,omitempty"`
}

// Container is one container as agentd's local API (GET /v1/containers on
// the agent) shows it.
type Container struct {
	ContainerID string `json:"container_id"`
	TaskID      string `json:"task_id"`
	FrameworkID string `json:"framework_id"`
	ExecutorID  string `json:"executor_id,omitempty"`
	State       string `json:"state"`
	// Cgroup is the path relative to the hierarchy's mount point, the same
	// in every v1 controller: /allot/<container_id>, or nested
	// /allot/<executor container>/<container_id>.
	Cgroup      string         `json:"cgroup"`
	Sandbox     string         `json:"sandbox"`
	Pids        []int          `json:"pids"`
	Requests    Resources      `json:"requests"`
	Limits      Limits         `json:"limits"`
	Revocable   bool           `json:"revocable"`
	OOMScoreAdj int            `json:"oom_score_adj"`
	Usage       ContainerUsage `json:"usage"`
	StartedAt   time.Time      `json:"started_at"`
}

// ContainerUsage is what a container uses, from its cgroup's own
// statistics: cpus in cores (averaged since the previous call that saw the
// container, within a minute, else since it started), mem in MiB now.
type ContainerUsage struct {
	Cpus float64 `json:"cpus"`
	Mem  float64 `json:"mem"`
}

// ContainerList is the answer of GET /v1/containers.
type ContainerList struct {
	Containers []Container `json:"containers"`
}
