"""Topology: one trial -> its Kubernetes objects (Service, ConfigMap, PodGroup, Pods), through the Jinja2 templates,
and the Kueue Workload that admits them (`workload`)."""

from ringleader.topology.rendering import TemplateError, render
from ringleader.topology.settings import RenderSettings

__all__ = ["RenderSettings", "TemplateError", "render"]
