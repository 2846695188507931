// Preloaded into manent-server by `bench/engine-overhead.ts --cpu-prof DIR` (NODE_OPTIONS cannot
// carry --cpu-prof): profiles the whole process and writes DIR/manent-server-PID.cpuprofile at exit.
import { Session } from "node:inspector";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.env.MANENT_BENCH_CPU_PROF_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 200 });
  session.post("Profiler.start");
  process.once("exit", () => {
    // An in-process inspector session answers synchronously, so this completes inside 'exit'.
    session.post("Profiler.stop", (err, result) => {
      if (!err) writeFileSync(join(dir, `manent-server-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
