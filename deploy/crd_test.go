package deploy

// Typed mirrors of the custom resources the manifests use. The Go module
// proxy this project builds through does not serve sigs.k8s.io/lws or
// github.com/kserve/kserve, so their API packages cannot be imported; these
// structs repeat their JSON field names and nesting (LeaderWorkerSet
// leaderworkerset.x-k8s.io/v1; ServingRuntime serving.kserve.io/v1alpha1;
// InferenceService serving.kserve.io/v1beta1, the predictor fields the
// manifests may use) and reuse k8s.io/api's types where the upstream ones do,
// so a strict decode rejects a misspelt or misplaced field as the API server
// would. Status is left out: manifests do not set it.

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// LeaderWorkerSet mirrors sigs.k8s.io/lws/api/leaderworkerset/v1.
type LeaderWorkerSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LeaderWorkerSetSpec `json:"spec,omitempty"`
}

type LeaderWorkerSetSpec struct {
	Replicas             *int32               `json:"replicas,omitempty"`
	LeaderWorkerTemplate LeaderWorkerTemplate `json:"leaderWorkerTemplate"`
	RolloutStrategy      RolloutStrategy      `json:"rolloutStrategy,omitempty"`
	StartupPolicy        string               `json:"startupPolicy"`
	NetworkConfig        *NetworkConfig       `json:"networkConfig,omitempty"`
}

type LeaderWorkerTemplate struct {
	LeaderTemplate                       *corev1.PodTemplateSpec                                 `json:"leaderTemplate,omitempty"`
	WorkerTemplate                       corev1.PodTemplateSpec                                  `json:"workerTemplate"`
	Size                                 *int32                                                  `json:"size,omitempty"`
	RestartPolicy                        string                                                  `json:"restartPolicy,omitempty"`
	SubGroupPolicy                       *SubGroupPolicy                                         `json:"subGroupPolicy,omitempty"`
	VolumeClaimTemplates                 []corev1.PersistentVolumeClaim                          `json:"volumeClaimTemplates,omitempty"`
	PersistentVolumeClaimRetentionPolicy *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy `json:"persistentVolumeClaimRetentionPolicy,omitempty"`
}

type RolloutStrategy struct {
	Type                       string                      `json:"type"`
	RollingUpdateConfiguration *RollingUpdateConfiguration `json:"rollingUpdateConfiguration,omitempty"`
}

type RollingUpdateConfiguration struct {
	Partition      *int32             `json:"partition,omitempty"`
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable,omitempty"`
	MaxSurge       intstr.IntOrString `json:"maxSurge,omitempty"`
}

type SubGroupPolicy struct {
	Type         *string `json:"subGroupPolicyType,omitempty"`
	SubGroupSize *int32  `json:"subGroupSize,omitempty"`
}

type NetworkConfig struct {
	SubdomainPolicy *string `json:"subdomainPolicy"`
}

// LWS's enumerations (the CRD's validation), checked by validLWS.
var (
	lwsStartupPolicies = []string{"LeaderReady", "LeaderCreated"}
	lwsRestartPolicies = []string{"RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "Default", "None"}
)

// ServingRuntime mirrors github.com/kserve/kserve/pkg/apis/serving/v1alpha1.
type ServingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ServingRuntimeSpec `json:"spec,omitempty"`
}

type ServingRuntimeSpec struct {
	SupportedModelFormats []SupportedModelFormat `json:"supportedModelFormats,omitempty"`
	MultiModel            *bool                  `json:"multiModel,omitempty"`
	Disabled              *bool                  `json:"disabled,omitempty"`
	ProtocolVersions      []string               `json:"protocolVersions,omitempty"`
	WorkerSpec            *RuntimeWorkerSpec     `json:"workerSpec,omitempty"`
	ServingRuntimePodSpec `json:",inline"`
	GrpcEndpoint          *string        `json:"grpcEndpoint,omitempty"`
	GrpcDataEndpoint      *string        `json:"grpcDataEndpoint,omitempty"`
	HTTPDataEndpoint      *string        `json:"httpDataEndpoint,omitempty"`
	Replicas              *uint16        `json:"replicas,omitempty"`
	StorageHelper         *StorageHelper `json:"storageHelper,omitempty"`
}

type SupportedModelFormat struct {
	Name       string  `json:"name"`
	Version    *string `json:"version,omitempty"`
	AutoSelect *bool   `json:"autoSelect,omitempty"`
	Priority   *int32  `json:"priority,omitempty"`
}

type ServingRuntimePodSpec struct {
	Containers       []corev1.Container            `json:"containers"`
	Volumes          []corev1.Volume               `json:"volumes,omitempty"`
	NodeSelector     map[string]string             `json:"nodeSelector,omitempty"`
	Affinity         *corev1.Affinity              `json:"affinity,omitempty"`
	Tolerations      []corev1.Toleration           `json:"tolerations,omitempty"`
	Labels           map[string]string             `json:"labels,omitempty"`
	Annotations      map[string]string             `json:"annotations,omitempty"`
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	HostIPC          bool                          `json:"hostIPC,omitempty"`
	SchedulerName    string                        `json:"schedulerName,omitempty"`
	ResourceClaims   []corev1.PodResourceClaim     `json:"resourceClaims,omitempty"`
}

type RuntimeWorkerSpec struct {
	ServingRuntimePodSpec `json:",inline"`
	PipelineParallelSize  *int `json:"pipelineParallelSize,omitempty"`
	TensorParallelSize    *int `json:"tensorParallelSize,omitempty"`
}

type StorageHelper struct {
	Disabled bool `json:"disabled,omitempty"`
}

// KServe's protocol names (pkg/constants InferenceServiceProtocol).
var kserveProtocols = []string{"v1", "v2", "grpc-v1", "grpc-v2"}

// InferenceService mirrors github.com/kserve/kserve/pkg/apis/serving/v1beta1
// with the predictor's model form only (no framework-specific predictors,
// explainer or transformer: the manifests use none).
type InferenceService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              InferenceServiceSpec `json:"spec,omitempty"`
}

type InferenceServiceSpec struct {
	Predictor PredictorSpec `json:"predictor"`
}

// PredictorSpec: v1beta1's PodSpec is core's PodSpec with containers
// optional; ComponentExtensionSpec's scalar fields.
type PredictorSpec struct {
	Model                  *ModelSpec `json:"model,omitempty"`
	StorageContainerName   *string    `json:"storageContainerName,omitempty"`
	corev1.PodSpec         `json:",inline"`
	ComponentExtensionSpec `json:",inline"`
}

type ComponentExtensionSpec struct {
	MinReplicas          *int32                     `json:"minReplicas,omitempty"`
	MaxReplicas          int32                      `json:"maxReplicas,omitempty"`
	ScaleTarget          *int32                     `json:"scaleTarget,omitempty"`
	ScaleMetric          *string                    `json:"scaleMetric,omitempty"`
	ScaleMetricType      *string                    `json:"scaleMetricType,omitempty"`
	ContainerConcurrency *int64                     `json:"containerConcurrency,omitempty"`
	TimeoutSeconds       *int64                     `json:"timeout,omitempty"`
	CanaryTrafficPercent *int64                     `json:"canaryTrafficPercent,omitempty"`
	Labels               map[string]string          `json:"labels,omitempty"`
	Annotations          map[string]string          `json:"annotations,omitempty"`
	DeploymentStrategy   *appsv1.DeploymentStrategy `json:"deploymentStrategy,omitempty"`
}

type ModelSpec struct {
	ModelFormat      ModelFormat `json:"modelFormat"`
	Runtime          *string     `json:"runtime,omitempty"`
	StorageURI       *string     `json:"storageUri,omitempty"`
	RuntimeVersion   *string     `json:"runtimeVersion,omitempty"`
	ProtocolVersion  *string     `json:"protocolVersion,omitempty"`
	corev1.Container `json:",inline"`
}

type ModelFormat struct {
	Name    string  `json:"name"`
	Version *string `json:"version,omitempty"`
}
