# syntax=docker/dockerfile:1
#
# gpumem-exporter container image.
#
#   docker build -t gpumem-exporter:0.1.0 .
#   docker run --rm --gpus all -p 10049:10049 gpumem-exporter:0.1.0 --source=nvml
#
# The image carries no NVIDIA library. NVML (libnvidia-ml.so.1) belongs to the host's driver
# and must match it: the NVIDIA container runtime (nvidia-container-toolkit: `--gpus`,
# the `nvidia` RuntimeClass, or CDI) injects it together with /dev/nvidia* when the container
# has NVIDIA_VISIBLE_DEVICES set and `utility` in NVIDIA_DRIVER_CAPABILITIES. The exporter
# loads it at run time (dlopen), so the binary starts without it and says so.

FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# Cache mounts keep the crates registry and the target directory between builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
 && install -D -m 0755 target/release/gpumem-exporter /out/gpumem-exporter

# glibc, libgcc and nothing else: no shell, no package manager.
FROM gcr.io/distroless/cc-debian12
LABEL org.opencontainers.image.title="gpumem-exporter" \
      org.opencontainers.image.description="Prometheus exporter for GPU memory: NVML, allocator reports, leak slope, seconds-to-OOM, fragmentation" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/gpumem-exporter /usr/local/bin/gpumem-exporter
# Root by default: the Helm chart documents why (ingest socket in a root-owned hostPath)
# and offers runAsNonRoot with uid 65532, distroless's `nonroot`.
EXPOSE 10049
ENTRYPOINT ["/usr/local/bin/gpumem-exporter"]
