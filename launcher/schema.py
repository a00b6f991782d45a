"""Strict pydantic models of band.yaml (schemaVersion "1"): the validation gate.

Every model forbids unknown fields and takes both the camelCase keys of the file
and their snake_case names, exactly like upstream's models (band.docker.launcher,
band-sdk 6.0.1): strict about keys, not about scalars. Values go through pydantic's
lax mode as upstream's do: a bool field takes true/false, 1/0 and the words
"true"/"yes"/"on"/"1" (and their opposites) in any case; a string field takes text
(or UTF-8 bytes) but never a number or a bool; schemaVersion must be the string "1".
`config.build_spec` reads validated documents with the same coercion (`_flag`).
Imported only when a document has not been validated before (see `config`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from launcher.constants import DEFAULT_ENTRYPOINT, DEFAULT_PROJECT_PATH
from launcher.errors import LauncherError, Phase
from launcher.urls import repo_url_problem

FORBID_UNKNOWN_KEYS = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class AgentModel(BaseModel):
    model_config = FORBID_UNKNOWN_KEYS
    id: str = ""
    entrypoint: str = DEFAULT_ENTRYPOINT


class BandModel(BaseModel):
    model_config = FORBID_UNKNOWN_KEYS
    rest_url: str = Field(default="", alias="restUrl")
    ws_url: str = Field(default="", alias="wsUrl")


class ProjectModel(BaseModel):
    model_config = FORBID_UNKNOWN_KEYS
    path: str = DEFAULT_PROJECT_PATH


class RepoModel(BaseModel):
    model_config = FORBID_UNKNOWN_KEYS
    url: str
    branch: str | None = None
    index: bool = False

    @field_validator("url")
    @classmethod
    def url_is_supported(cls, value: str) -> str:
        if problem := repo_url_problem(value):
            raise ValueError(problem)
        return value


class CredentialsModel(BaseModel):
    model_config = FORBID_UNKNOWN_KEYS
    source: Literal["proxy-managed", "workspace-env-file"]
    path: str | None = None
    acknowledge_plaintext_in_sandbox: bool = Field(
        default=False, alias="acknowledgePlaintextInSandbox"
    )

    @model_validator(mode="after")
    def path_matches_source(self) -> CredentialsModel:
        if self.source == "workspace-env-file" and not self.path:
            raise ValueError("path is required for source 'workspace-env-file'")
        if self.source == "proxy-managed" and self.path is not None:
            raise ValueError("path is not used with source 'proxy-managed'")
        return self


class RuntimeModel(BaseModel):
    model_config = FORBID_UNKNOWN_KEYS
    environment_path: str = Field(alias="environmentPath")
    state_path: str = Field(alias="statePath")
    cache_path: str = Field(alias="cachePath")
    log_path: str = Field(alias="logPath")


class WorkspaceModel(BaseModel):
    """The whole band.yaml."""

    model_config = FORBID_UNKNOWN_KEYS
    schema_version: Literal["1"] = Field(alias="schemaVersion")
    agent: AgentModel = AgentModel()
    band: BandModel = BandModel()
    project: ProjectModel = ProjectModel()
    repo: RepoModel | None = None
    credentials: CredentialsModel | None = None
    runtime: RuntimeModel


def validate_document(document: dict[str, object], *, source: str) -> None:
    """Raise `[config]` listing every `location: problem` pair; values never echoed."""
    try:
        WorkspaceModel.model_validate(document)
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(top level)'}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        )
        raise LauncherError(Phase.CONFIG, f"invalid {source}: {details}") from None
