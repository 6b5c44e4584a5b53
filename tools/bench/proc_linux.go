package main

import "syscall"

// childProcAttr makes the kernel kill a child when the benchmark dies, even by
// SIGKILL, so no etcd member outlives it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
