# syntax=docker/dockerfile:1
#
# gpumem-exporter container image.
#
#   docker build -t gpumem-exporter:0.1.0 .
#   docker run --rm --gpus all -p 10049:10049 gpumem-exporter:0.1.0 --source=nvml
#
# It also carries the Python client's wheel in /usr/share/gpumem/python/, from which training
# images install it.
#
# The image carries no NVIDIA library. NVML (libnvidia-ml.so.1) belongs to the host's driver
# and must match it: the NVIDIA container runtime (nvidia-container-toolkit: `--gpus`,
# the `nvidia` RuntimeClass, or CDI) injects it together with /dev/nvidia* when the container
# has NVIDIA_VISIBLE_DEVICES set and `utility` in NVIDIA_DRIVER_CAPABILITIES. The exporter
# loads it at run time (dlopen), so the binary starts without it and says so.

FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# Cache mounts keep the crates registry and the target directory between builds. The lean
# build (no default features): the exporter in a cluster draws no charts and has no terminal
# UI; those stay in the full build for the command-line workflows. Relative relocations packed
# (RELR, glibc 2.36 as in the runtime image below): the loader no longer reads half a megabyte
# of relocation records at start, 0.2-0.3 MiB less resident (bench/RESULTS.md).
ENV RUSTFLAGS="-C link-arg=-Wl,-z,pack-relative-relocs"
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --no-default-features \
 && install -D -m 0755 target/release/gpumem-exporter /out/gpumem-exporter

# The Python client as a wheel, for training images to copy from this image (see
# helm/gpumem-exporter/examples/training-image.Dockerfile). The name gpumem-client on the
# public package index is not this project's, so the client is never installed by name from
# there. A build/ left by a local `pip wheel` could bring stale modules into the wheel.
FROM python:3-slim AS client
WORKDIR /src
COPY clients/python ./clients/python
RUN rm -rf clients/python/build clients/python/*.egg-info \
 && pip wheel --no-deps --no-cache-dir --disable-pip-version-check ./clients/python -w /out/wheels

# glibc, libgcc and nothing else: no shell, no package manager.
FROM gcr.io/distroless/cc-debian12
LABEL org.opencontainers.image.title="gpumem-exporter" \
      org.opencontainers.image.description="Prometheus exporter for GPU memory: NVML, allocator reports, leak slope, seconds-to-OOM, fragmentation" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/gpumem-exporter /usr/local/bin/gpumem-exporter
# Not used by the exporter: a wheel for training images, `pip install --no-index
# --find-links /usr/share/gpumem/python gpumem-client` once copied out.
COPY --from=client /out/wheels/ /usr/share/gpumem/python/
# Root by default: the Helm chart documents why (ingest socket in a root-owned hostPath)
# and offers runAsNonRoot with uid 65532, distroless's `nonroot`.
EXPOSE 10049
ENTRYPOINT ["/usr/local/bin/gpumem-exporter"]
