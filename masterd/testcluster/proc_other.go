//go:build !linux

package testcluster

import "syscall"

func serverProcAttr() *syscall.SysProcAttr { return nil }

// pidAlive answers true so that nothing is swept where liveness is unknown.
func pidAlive(int) bool { return true }
