package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// etcdPackage is where etcd comes from on this project's machines.
const etcdPackage = "etcd-server"

// etcdCluster is a three-member etcd cluster on loopback, the anchor the
// write benchmark compares masterd with.
type etcdCluster struct {
	members []*etcdMember
}

type etcdMember struct {
	name      string
	clientURL string
	logPath   string
	cmd       *exec.Cmd
	done      chan struct{}
}

// findEtcd resolves the etcd binary and its version, or says which package
// provides it.
func findEtcd(bin string) (path, version string, err error) {
	path, err = exec.LookPath(bin)
	if err != nil {
		return "", "", fmt.Errorf("etcd not found (%w): install the Debian package %s (apt-get install -y %s) or pass -etcd PATH", err, etcdPackage, etcdPackage)
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --version: %w", path, err)
	}
	version = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "etcd Version:"))
	return path, version, nil
}

func startEtcd(bin, dir string, n int) (*etcdCluster, error) {
	addrs, err := freeLoopbackAddrs(2 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("e%d=http://%s", i+1, addrs[2*i+1]))
	}
	c := &etcdCluster{}
	for i := range n {
		m := &etcdMember{
			name:      fmt.Sprintf("e%d", i+1),
			clientURL: "http://" + addrs[2*i],
			done:      make(chan struct{}),
		}
		peerURL := "http://" + addrs[2*i+1]
		memberDir := filepath.Join(dir, m.name)
		if err := os.MkdirAll(memberDir, 0o755); err != nil {
			c.stop()
			return nil, fmt.Errorf("etcd %s: %w", m.name, err)
		}
		m.logPath = filepath.Join(memberDir, "etcd.log")
		log, err := os.Create(m.logPath)
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("etcd %s: %w", m.name, err)
		}
		m.cmd = exec.Command(bin,
			"--name", m.name,
			"--data-dir", filepath.Join(memberDir, "data"),
			"--listen-client-urls", m.clientURL,
			"--advertise-client-urls", m.clientURL,
			"--listen-peer-urls", peerURL,
			"--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "allot-bench",
			"--logger", "zap",
		)
		m.cmd.Stdout, m.cmd.Stderr = log, log
		m.cmd.SysProcAttr = childProcAttr()
		if err := m.cmd.Start(); err != nil {
			log.Close()
			c.stop()
			return nil, fmt.Errorf("start etcd %s: %w", m.name, err)
		}
		go func() {
			m.cmd.Wait()
			log.Close()
			close(m.done)
		}()
		c.members = append(c.members, m)
	}
	return c, nil
}

// waitReady waits until every member accepts a write, and returns the index
// of the member that leads.
func (c *etcdCluster) waitReady(ctx context.Context) (int, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		leader, err := c.readyOnce(ctx, client)
		if err == nil {
			return leader, nil
		}
		for _, m := range c.members {
			select {
			case <-m.done:
				return -1, fmt.Errorf("etcd %s exited (%v); see %s", m.name, m.cmd.ProcessState, m.logPath)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("wait for etcd: %w (last: %v)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

func (c *etcdCluster) readyOnce(ctx context.Context, client *http.Client) (int, error) {
	leader := -1
	for i, m := range c.members {
		req, err := etcdPut(m.clientURL, "bench-ready", []byte(m.name))
		if err != nil {
			return -1, err
		}
		if err := doOK(ctx, client, req); err != nil {
			return -1, fmt.Errorf("etcd %s put: %w", m.name, err)
		}
		var status struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader string `json:"leader"`
		}
		if err := postJSON(ctx, client, m.clientURL+"/v3/maintenance/status", struct{}{}, &status); err != nil {
			return -1, fmt.Errorf("etcd %s status: %w", m.name, err)
		}
		if status.Leader != "" && status.Leader == status.Header.MemberID {
			leader = i
		}
	}
	if leader < 0 {
		return -1, errors.New("no etcd member says it leads")
	}
	return leader, nil
}

func (c *etcdCluster) stop() {
	for _, m := range c.members {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(10 * time.Second)
	for _, m := range c.members {
		select {
		case <-m.done:
		case <-deadline:
			m.cmd.Process.Kill()
			<-m.done
		}
	}
}

// etcdPut builds a put through etcd's v3 JSON gateway.
func etcdPut(baseURL, key string, value []byte) (*http.Request, error) {
	body, err := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString(value),
	})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, baseURL+"/v3/kv/put", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

func freeLoopbackAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}
