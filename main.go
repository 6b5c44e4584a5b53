// Command terraform-provider-allot is the Terraform provider for allot.
package main

import (
	"flag"
	"log"
	"os"
	runtimedebug "runtime/debug"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/allot/allot/provider"
)

// version is set by the release build with -ldflags "-X main.version=1.2.3".
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	// Terraform drops provider logs unless a TF_LOG* variable asks for them;
	// making none then saves a third of the provider's time in large plans.
	// A -debug provider is started by its user, not by Terraform, and its
	// logs go to the user's terminal: they stay.
	if !debug {
		provider.SilenceUnreadLogs()
	}
	// The provider lives for one Terraform command with a heap of a few MB
	// and allocates for every value it converts: at 1 000 resources the
	// collector took a quarter of its CPU, and collecting a quarter as often
	// gives most of that back. GOGC still rules when set.
	if os.Getenv("GOGC") == "" {
		runtimedebug.SetGCPercent(400)
	}
	// What providerserver.Serve does, with the provider's own protocol
	// server: the framework's, with fast paths for the calls Terraform makes
	// for every resource of a plan (see provider.NewProtocolServer).
	var opts []tf6server.ServeOpt
	if debug {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	newServer := provider.NewProtocolServer(version)
	err := tf6server.Serve(provider.Address, func() tfprotov6.ProviderServer {
		server, err := newServer()
		if err != nil {
			log.Fatal(err.Error())
		}
		return server
	}, opts...)
	if err != nil {
		log.Fatal(err.Error())
	}
}
