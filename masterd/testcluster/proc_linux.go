package testcluster

import (
	"errors"
	"syscall"
)

// serverProcAttr makes the kernel kill a server when the process that started
// it dies, so a crashed test or an interrupted benchmark leaves nothing behind.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func pidAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
