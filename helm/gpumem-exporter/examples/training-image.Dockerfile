# syntax=docker/dockerfile:1
#
# A training image with the gpumem client in it, for examples/training-pod.yaml.
#
#   docker build -t gpumem-exporter:0.1.0 .        # the exporter image, from the repository root
#   docker build -f helm/gpumem-exporter/examples/training-image.Dockerfile \
#     --build-arg EXPORTER_IMAGE=gpumem-exporter:0.1.0 \
#     -t registry.example.com/ml/llama-ft-trainer:0.1.0 helm/gpumem-exporter/examples
#
# The client's wheel comes from the exporter image the nodes run (/usr/share/gpumem/python/),
# so client and exporter are of one release. It is installed with --no-index: the name
# gpumem-client on the public package index is not this project's, and pip must not look
# there for it. The pod then starts with the client installed and runs no pip.
#
# Without the exporter image, build the wheel from a checkout of the repository instead:
#   pip wheel --no-deps ./clients/python -w wheels/
# and in the image: COPY wheels/ /tmp/gpumem/ in place of the COPY --from below.

# A stage of its own because COPY --from takes a stage or image name, not a build argument.
ARG EXPORTER_IMAGE=gpumem-exporter:0.1.0
FROM ${EXPORTER_IMAGE} AS gpumem

FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
COPY --from=gpumem /usr/share/gpumem/python/ /tmp/gpumem/
RUN pip install --no-cache-dir --no-index --find-links /tmp/gpumem gpumem-client \
 && python -c "import gpumem_client" \
 && rm -rf /tmp/gpumem
