import { status, type sendUnaryData, type Server, type ServerUnaryCall, type ServerWritableStream } from "@grpc/grpc-js";
import { HEALTH_SERVICE } from "../protocol/constants.js";
import { GRPCControllerService, type Empty as ControllerEmpty } from "../gen/go-plugin/grpc_controller.js";
import { GRPCStdioService, StdioData_Channel, type StdioData } from "../gen/go-plugin/grpc_stdio.js";
import {
  HealthCheckResponse_ServingStatus,
  HealthService,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from "../gen/go-plugin/health.js";
import type { Empty } from "../gen/google/protobuf/empty.js";

/** go-plugin's health service: "plugin" (and the server as a whole, "") are SERVING. */
export function addHealth(server: Server): void {
  server.addService(HealthService, {
    check(call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, cb: sendUnaryData<HealthCheckResponse>) {
      if (call.request.service !== HEALTH_SERVICE && call.request.service !== "") {
        cb({ code: status.NOT_FOUND, details: `unknown service ${call.request.service}` });
        return;
      }
      cb(null, { status: HealthCheckResponse_ServingStatus.SERVING });
    },
    watch(call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) {
      call.write({ status: HealthCheckResponse_ServingStatus.SERVING });
    },
  });
}

/** go-plugin's controller: Shutdown answers, then `shutdown` stops the process. */
export function addController(server: Server, shutdown: () => void): void {
  server.addService(GRPCControllerService, {
    shutdown(_call: ServerUnaryCall<ControllerEmpty, ControllerEmpty>, cb: sendUnaryData<ControllerEmpty>) {
      cb(null, {});
      setImmediate(shutdown);
    },
  });
}

/**
 * go-plugin's stdio stream: whatever the plugin writes to process.stdout after the handshake is
 * queued here and streamed to the host (which calls StreamStdio once), so it never corrupts the
 * handshake channel.
 */
export class StdioRelay {
  private readonly queue: StdioData[] = [];
  private stream: ServerWritableStream<Empty, StdioData> | undefined;

  push(channel: StdioData_Channel, data: Buffer): void {
    const chunk = { channel, data };
    if (this.stream && !this.stream.cancelled) this.stream.write(chunk);
    else if (this.queue.length < 1024) this.queue.push(chunk);
  }

  register(server: Server): void {
    server.addService(GRPCStdioService, {
      streamStdio: (call: ServerWritableStream<Empty, StdioData>) => {
        this.stream = call;
        for (const chunk of this.queue.splice(0)) call.write(chunk);
      },
    });
  }
}

export { StdioData_Channel };
