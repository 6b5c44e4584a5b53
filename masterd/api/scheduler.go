package api

import "time"

// Scheduler call types (POST /v1/scheduler).
const (
	CallSubscribe   = "SUBSCRIBE"
	CallAccept      = "ACCEPT"
	CallDecline     = "DECLINE"
	CallRevive      = "REVIVE"
	CallSuppress    = "SUPPRESS"
	CallKill        = "KILL"
	CallAcknowledge = "ACKNOWLEDGE"
	CallReconcile   = "RECONCILE"
	CallTeardown    = "TEARDOWN"
)

// Scheduler event types, one per line of the SUBSCRIBE stream.
const (
	EventSubscribed = "SUBSCRIBED"
	EventOffers     = "OFFERS"
	EventRescind    = "RESCIND"
	EventUpdate     = "UPDATE"
	EventFailure    = "FAILURE"
	EventHeartbeat  = "HEARTBEAT"
	EventError      = "ERROR"
)

// Capabilities a framework or agent may announce.
const (
	CapabilityRevocableResources = "REVOCABLE_RESOURCES"
	CapabilityTaskResourceLimits = "TASK_RESOURCE_LIMITS"
)

// Task states.
const (
	TaskStaging     = "TASK_STAGING"
	TaskStarting    = "TASK_STARTING"
	TaskRunning     = "TASK_RUNNING"
	TaskFinished    = "TASK_FINISHED"
	TaskFailed      = "TASK_FAILED"
	TaskKilled      = "TASK_KILLED"
	TaskError       = "TASK_ERROR"
	TaskLost        = "TASK_LOST"
	TaskDropped     = "TASK_DROPPED"
	TaskUnreachable = "TASK_UNREACHABLE"
	TaskGone        = "TASK_GONE"
)

// TaskStates lists every task state, in the order a task may go through them.
var TaskStates = []string{TaskStaging, TaskStarting, TaskRunning, TaskFinished, TaskFailed, TaskKilled,
	TaskError, TaskLost, TaskDropped, TaskUnreachable, TaskGone}

// IsTerminal reports whether a task in state will never run again.
func IsTerminal(state string) bool {
	switch state {
	case TaskFinished, TaskFailed, TaskKilled, TaskError, TaskLost, TaskDropped, TaskGone:
		return true
	}
	return false
}

// Reasons a task status gives.
const (
	ReasonTaskInvalid               = "REASON_TASK_INVALID"
	ReasonContainerLimitationMemory = "REASON_CONTAINER_LIMITATION_MEMORY"
	ReasonMemoryRequestExceeded     = "REASON_MEMORY_REQUEST_EXCEEDED"
	ReasonContainerPreempted        = "REASON_CONTAINER_PREEMPTED"
	ReasonAgentRemoved              = "REASON_AGENT_REMOVED"
	ReasonAgentRestarted            = "REASON_AGENT_RESTARTED"
	ReasonAgentDisconnected         = "REASON_AGENT_DISCONNECTED"
	ReasonInvalidOffers             = "REASON_INVALID_OFFERS"
	ReasonReconciliation            = "REASON_RECONCILIATION"
	ReasonCommandExecutorFailed     = "REASON_COMMAND_EXECUTOR_FAILED"
	ReasonFrameworkRemoved          = "REASON_FRAMEWORK_REMOVED"
	ReasonTaskKilledDuringLaunch    = "REASON_TASK_KILLED_DURING_LAUNCH"
	ReasonTaskUnknown               = "REASON_TASK_UNKNOWN"
)

// FrameworkInfo describes a framework at SUBSCRIBE.
type FrameworkInfo struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Principal string `json:"principal,omitempty"`
	// Label sets frameworks of one principal apart for rate limiting: a
	// limit named {principal, label} throttles only them (the principal's
	// own limit still caps all its frameworks together).
	Label                  string   `json:"label,omitempty"`
	Roles                  []string `json:"roles"`
	Capabilities           []string `json:"capabilities,omitempty"`
	FailoverTimeoutSeconds float64  `json:"failover_timeout_seconds,omitempty"`
}

// Filters accompany ACCEPT and DECLINE.
type Filters struct {
	// RefuseSeconds is how long the declined agent's resources are not
	// offered to the framework again (default 5).
	RefuseSeconds *float64 `json:"refuse_seconds,omitempty"`
}

// CommandInfo is what a task runs: with Shell true (the default) Value is
// run by /bin/sh -c; with Shell false Value is the program and Arguments
// its argv (Arguments[0] is argv[0]; empty means just the program).
type CommandInfo struct {
	Value       string            `json:"value"`
	Shell       *bool             `json:"shell,omitempty"`
	Arguments   []string          `json:"arguments,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
}

// KillPolicy says how a task is killed: SIGTERM to every process of its
// cgroup, then SIGKILL of what is left after the grace period.
type KillPolicy struct {
	// GracePeriodSeconds defaults to DefaultKillGracePeriodSeconds.
	GracePeriodSeconds *float64 `json:"grace_period_seconds,omitempty"`
}

// LinuxInfo configures a task's cgroups.
type LinuxInfo struct {
	ShareCgroups *bool `json:"share_cgroups,omitempty"`
}

// ContainerInfo configures a task's container.
type ContainerInfo struct {
	LinuxInfo *LinuxInfo `json:"linux_info,omitempty"`
}

// TaskInfo describes a task to launch.
type TaskInfo struct {
	TaskID     string         `json:"task_id"`
	Name       string         `json:"name"`
	AgentID    string         `json:"agent_id"`
	Resources  Resources      `json:"resources"`
	Limits     Limits         `json:"limits,omitempty"`
	Revocable  bool           `json:"revocable,omitempty"`
	Command    *CommandInfo   `json:"command,omitempty"`
	KillPolicy *KillPolicy    `json:"kill_policy,omitempty"`
	Container  *ContainerInfo `json:"container,omitempty"`
}

// ExecutorInfo is the executor of a task group.
type ExecutorInfo struct {
	ExecutorID string    `json:"executor_id"`
	Resources  Resources `json:"resources"`
}

// Operation types.
const (
	OperationLaunch      = "LAUNCH"
	OperationLaunchGroup = "LAUNCH_GROUP"
)

// Launch launches tasks each on its own.
type Launch struct {
	Tasks []TaskInfo `json:"tasks"`
}

// LaunchGroup launches tasks together under one executor.
type LaunchGroup struct {
	Executor ExecutorInfo `json:"executor"`
	Tasks    []TaskInfo   `json:"tasks"`
}

// Operation is one operation of an ACCEPT.
type Operation struct {
	Type        string       `json:"type"`
	Launch      *Launch      `json:"launch,omitempty"`
	LaunchGroup *LaunchGroup `json:"launch_group,omitempty"`
}

// Call bodies.
type (
	Subscribe struct {
		FrameworkInfo FrameworkInfo `json:"framework_info"`
	}
	Accept struct {
		OfferIDs   []string    `json:"offer_ids"`
		Operations []Operation `json:"operations"`
		Filters    *Filters    `json:"filters,omitempty"`
	}
	Decline struct {
		OfferIDs []string `json:"offer_ids"`
		Filters  *Filters `json:"filters,omitempty"`
	}
	Revive struct {
		Roles []string `json:"roles,omitempty"`
	}
	Suppress struct {
		Roles []string `json:"roles,omitempty"`
	}
	Kill struct {
		TaskID  string `json:"task_id"`
		AgentID string `json:"agent_id,omitempty"`
	}
	Acknowledge struct {
		AgentID string `json:"agent_id"`
		TaskID  string `json:"task_id"`
		UUID    string `json:"uuid"`
	}
	ReconcileTask struct {
		TaskID  string `json:"task_id"`
		AgentID string `json:"agent_id,omitempty"`
	}
	Reconcile struct {
		Tasks []ReconcileTask `json:"tasks"`
	}
	Teardown struct{}
)

// Call is one scheduler API request.
type Call struct {
	FrameworkID string       `json:"framework_id,omitempty"`
	Type        string       `json:"type"`
	Subscribe   *Subscribe   `json:"subscribe,omitempty"`
	Accept      *Accept      `json:"accept,omitempty"`
	Decline     *Decline     `json:"decline,omitempty"`
	Revive      *Revive      `json:"revive,omitempty"`
	Suppress    *Suppress    `json:"suppress,omitempty"`
	Kill        *Kill        `json:"kill,omitempty"`
	Acknowledge *Acknowledge `json:"acknowledge,omitempty"`
	Reconcile   *Reconcile   `json:"reconcile,omitempty"`
	Teardown    *Teardown    `json:"teardown,omitempty"`
}

// OfferResource is one piece of an offer: resources of one role, revocable
// or not. Revocable resources are of two kinds (Mesos's throttle_info):
// usage slack an agent's estimator reports (Throttleable: tasks on it may
// be throttled and are killed by the agent's QoS controller when the node
// needs the room) and reservations lent while their role leaves them idle
// (not throttleable: tasks on them are only ever evicted, when the lender
// launches on its reservation).
type OfferResource struct {
	Role         string    `json:"role"`
	Revocable    bool      `json:"revocable"`
	Throttleable bool      `json:"throttleable,omitempty"`
	Scalars      Resources `json:"scalars"`
}

// Offer bundles one agent's resources for one framework.
type Offer struct {
	ID          string          `json:"id"`
	FrameworkID string          `json:"framework_id"`
	AgentID     string          `json:"agent_id"`
	Hostname    string          `json:"hostname"`
	Resources   []OfferResource `json:"resources"`
}

// TaskStatus reports a task's state.
type TaskStatus struct {
	TaskID    string    `json:"task_id"`
	AgentID   string    `json:"agent_id"`
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	UUID      string    `json:"uuid,omitempty"`
	Timestamp time.Time `json:"timestamp"`
	Healthy   *bool     `json:"healthy,omitempty"`
}

// Event bodies.
type (
	Subscribed struct {
		FrameworkID              string  `json:"framework_id"`
		HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds"`
	}
	Offers struct {
		Offers []Offer `json:"offers"`
	}
	Rescind struct {
		OfferID string `json:"offer_id"`
	}
	Update struct {
		Status TaskStatus `json:"status"`
	}
	Failure struct {
		AgentID string `json:"agent_id"`
	}
	ErrorEvent struct {
		Message string `json:"message"`
	}
)

// Event is one line of the SUBSCRIBE stream.
type Event struct {
	Type       string      `json:"type"`
	Subscribed *Subscribed `json:"subscribed,omitempty"`
	Offers     *Offers     `json:"offers,omitempty"`
	Rescind    *Rescind    `json:"rescind,omitempty"`
	Update     *Update     `json:"update,omitempty"`
	Failure    *Failure    `json:"failure,omitempty"`
	Error      *ErrorEvent `json:"error,omitempty"`
}

// Framework is a framework as GET /v1/frameworks shows it.
type Framework struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Principal    string    `json:"principal"`
	Label        string    `json:"label,omitempty"`
	Roles        []string  `json:"roles"`
	Capabilities []string  `json:"capabilities"`
	Connected    bool      `json:"connected"`
	Suppressed   []string  `json:"suppressed_roles"`
	Allocated    Resources `json:"allocated"`
	Offered      Resources `json:"offered"`
}

// Task is a task as GET /v1/tasks shows it.
type Task struct {
	TaskID      string `json:"task_id"`
	FrameworkID string `json:"framework_id"`
	AgentID     string `json:"agent_id"`
	Name        string `json:"name"`
	Role        string `json:"role"`
	State       string `json:"state"`
	// Reason and Message are those of the task's last status update: why
	// a task ended (REASON_CONTAINER_PREEMPTED, REASON_CONTAINER_LIMITATION_MEMORY, …).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Resources are the task's requests; Limits, when the framework set
	// them, how far it may burst past them (a value may be "Infinity").
	Resources Resources `json:"resources"`
	Limits    Limits    `json:"limits,omitempty"`
	Revocable bool      `json:"revocable"`
}

// TaskFilter narrows GET /v1/tasks: every field left empty matches all.
type TaskFilter struct {
	States []string // any of these states
	Role   string   // exactly this role
	Agent  string   // this agent, by id
}

// List wrappers of the live endpoints.
type (
	FrameworkList struct {
		Frameworks []Framework `json:"frameworks"`
	}
	TaskList struct {
		Tasks []Task `json:"tasks"`
	}
	OfferList struct {
		Offers []Offer `json:"offers"`
	}
)
