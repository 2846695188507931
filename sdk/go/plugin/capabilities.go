package plugin

// Capability names, as announced in the response to Configure.
const (
	CapDryRun          = "dry_run"
	CapCurrentRelease  = "current_release"
	CapRollback        = "rollback"
	CapSlots           = "slots"
	CapTrafficRouter   = "traffic_router"
	CapTesters         = "testers"
	CapScale           = "scale"
	CapParallelTargets = "parallel_targets"
	CapDrift           = "drift"
)

// CapabilitiesOf lists the optional interfaces d implements, in a fixed order. Rollback needs
// both Rollbacker and ReleaseInspector; parallel_targets needs ParallelTargets() to say true.
func CapabilitiesOf(d Deployer) []string {
	caps := []string{}
	_, dry := d.(DryRunner)
	_, inspect := d.(ReleaseInspector)
	_, rollback := d.(Rollbacker)
	_, slots := d.(SlotDeployer)
	_, router := d.(TrafficRouter)
	_, testers := d.(TesterRouter)
	_, scale := d.(SlotScaler)
	p, parallel := d.(ParallelDeployer)
	_, drift := d.(DriftInspector)
	add := func(ok bool, name string) {
		if ok {
			caps = append(caps, name)
		}
	}
	add(dry, CapDryRun)
	add(inspect, CapCurrentRelease)
	add(rollback && inspect, CapRollback)
	add(slots, CapSlots)
	add(router, CapTrafficRouter)
	add(testers, CapTesters)
	add(scale, CapScale)
	add(parallel && p.ParallelTargets(), CapParallelTargets)
	add(drift, CapDrift)
	return caps
}
