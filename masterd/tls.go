package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/tlsutil"
)

const tlsUsage = `Usage: masterd tls ca -out DIR [-days N]
       masterd tls cert -ca DIR -name NAME [-hosts H1,H2] [-server] [-client] -out DIR [-days N]

Makes what a test cluster needs for TLS: a CA (ECDSA P-256; DIR/ca.pem and
DIR/ca-key.pem) and certificates it signs (OUT/NAME.pem and OUT/NAME-key.pem).
Every file is written with mode 0600 and none is overwritten.

A masterd needs a -server certificate: it names the DNS name server.allot,
which Raft peers require of each other, and the -hosts its API is reached at
(IP addresses and DNS names). Agents, frameworks and the provider may present
a -client certificate when the masters run with -tls-verify-incoming.

  masterd tls ca -out tls
  masterd tls cert -ca tls -name m1 -hosts 127.0.0.1,localhost -server -out tls
  masterd tls cert -ca tls -name agent -client -out tls
  masterd -id m1 ... -tls-cert tls/m1.pem -tls-key tls/m1-key.pem -tls-ca tls/ca.pem
`

// runTLS is `masterd tls`.
func runTLS(args []string, stdout io.Writer) (int, error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stdout, tlsUsage)
		if len(args) == 0 {
			return 2, errors.New("tls: want a subcommand, ca or cert")
		}
		return 0, nil
	}
	switch args[0] {
	case "ca":
		return runTLSCA(args[1:], stdout)
	case "cert":
		return runTLSCert(args[1:], stdout)
	}
	return 2, fmt.Errorf("tls: unknown subcommand %q: want ca or cert (masterd tls -h)", args[0])
}

// parseTLSFlags parses a subcommand's flags; done reports -h (answered).
func parseTLSFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, code int, err error) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, tlsUsage, "\nFlags of masterd tls ", fs.Name(), ":\n")
			fs.PrintDefaults()
			return true, 0, nil
		}
		return true, 2, fmt.Errorf("tls %s: %w (masterd tls -h)", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return true, 2, fmt.Errorf("tls %s: unexpected arguments: %v", fs.Name(), fs.Args())
	}
	return false, 0, nil
}

func runTLSCA(args []string, stdout io.Writer) (int, error) {
	fs := flag.NewFlagSet("ca", flag.ContinueOnError)
	out := fs.String("out", "", "directory to write ca.pem and ca-key.pem to (created 0700 if missing)")
	days := fs.Int("days", int(tlsutil.DefaultCAValidity/(24*time.Hour)), "days the CA is valid")
	if done, code, err := parseTLSFlags(fs, args, stdout); done {
		return code, err
	}
	if *out == "" {
		return 2, errors.New("tls ca: -out is required")
	}
	if *days <= 0 {
		return 2, fmt.Errorf("tls ca: -days must be positive, not %d", *days)
	}
	ca, err := tlsutil.NewAuthority("allot CA", time.Duration(*days)*24*time.Hour)
	if err != nil {
		return 1, err
	}
	if err := ca.Write(*out); err != nil {
		return 1, fmt.Errorf("tls ca: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s/%s and %s/%s\n", *out, tlsutil.CACertFile, *out, tlsutil.CAKeyFile)
	return 0, nil
}

func runTLSCert(args []string, stdout io.Writer) (int, error) {
	fs := flag.NewFlagSet("cert", flag.ContinueOnError)
	caDir := fs.String("ca", "", "directory of the CA (masterd tls ca -out)")
	name := fs.String("name", "", "the certificate's name: its common name and file names NAME.pem, NAME-key.pem")
	hosts := fs.String("hosts", "", "comma-separated IP addresses and DNS names the holder is reached at (required with -server)")
	server := fs.Bool("server", false, "a masterd's certificate: adds the DNS name "+tlsutil.ServerName+", which Raft peers require")
	client := fs.Bool("client", false, "a client's certificate (agentd, a framework, the provider): -hosts may be empty")
	out := fs.String("out", "", "directory to write the certificate and key to")
	days := fs.Int("days", int(tlsutil.DefaultCertValidity/(24*time.Hour)), "days the certificate is valid")
	if done, code, err := parseTLSFlags(fs, args, stdout); done {
		return code, err
	}
	var problems []error
	if *caDir == "" {
		problems = append(problems, errors.New("-ca is required"))
	}
	if api.ValidateName("name", *name) != nil {
		problems = append(problems, fmt.Errorf("-name %q: want a file-name-safe name such as m1", *name))
	}
	if !*server && !*client {
		problems = append(problems, errors.New("say what the certificate is for: -server (a masterd), -client (agentd, a framework, the provider) or both"))
	}
	hostList := api.SplitAddresses(*hosts)
	if *server && len(hostList) == 0 {
		problems = append(problems, errors.New("-server needs -hosts: the addresses clients reach the API at"))
	}
	if *out == "" {
		problems = append(problems, errors.New("-out is required"))
	}
	if *days <= 0 {
		problems = append(problems, fmt.Errorf("-days must be positive, not %d", *days))
	}
	if len(problems) > 0 {
		return 2, fmt.Errorf("tls cert: %w", errors.Join(problems...))
	}
	ca, err := tlsutil.LoadAuthority(*caDir)
	if err != nil {
		return 1, fmt.Errorf("tls cert: %w", err)
	}
	now := time.Now().Add(-time.Minute)
	certPEM, keyPEM, err := ca.Issue(tlsutil.CertRequest{Name: *name, Hosts: hostList, Server: *server,
		NotBefore: now, NotAfter: now.Add(time.Duration(*days) * 24 * time.Hour)})
	if err != nil {
		return 1, fmt.Errorf("tls cert: %w", err)
	}
	if err := tlsutil.WriteCert(*out, *name, certPEM, keyPEM); err != nil {
		return 1, fmt.Errorf("tls cert: %w", err)
	}
	cert, key := tlsutil.CertFiles(*out, *name)
	fmt.Fprintf(stdout, "wrote %s and %s\n", cert, key)
	return 0, nil
}
