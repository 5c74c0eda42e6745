package localaws

import "sort"

// maxParametersPerRequest is SSM's limit on the names of one GetParameters call.
const maxParametersPerRequest = 10

type getParameterRequest struct {
	Name           string `json:"Name"`
	WithDecryption bool   `json:"WithDecryption"`
}

type getParameterResponse struct {
	Parameter jsonParameter `json:"Parameter"`
}

type getParametersRequest struct {
	Names          []string `json:"Names"`
	WithDecryption bool     `json:"WithDecryption"`
}

type getParametersResponse struct {
	Parameters        []jsonParameter `json:"Parameters"`
	InvalidParameters []string        `json:"InvalidParameters"`
}

type jsonParameter struct {
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int     `json:"Version"`
}

// ssmAction runs one operation of AmazonSSM.
func (s *Server) ssmAction(operation string, body []byte) (any, error) {
	switch operation {
	case "GetParameter":
		var req getParameterRequest
		if err := decodeJSON(body, &req); err != nil {
			return nil, err
		}
		if req.Name == "" {
			return nil, newAPIError("ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
		}
		p, ok := s.parameters[req.Name]
		if !ok {
			return nil, newAPIError("ParameterNotFound", "Parameter %s not found.", req.Name)
		}
		return getParameterResponse{Parameter: s.toJSONParameter(p)}, nil
	case "GetParameters":
		var req getParametersRequest
		if err := decodeJSON(body, &req); err != nil {
			return nil, err
		}
		if len(req.Names) == 0 || len(req.Names) > maxParametersPerRequest {
			return nil, newAPIError("ValidationException", "1 validation error detected: Value at 'names' failed to satisfy constraint: Member must have length between 1 and %d", maxParametersPerRequest)
		}
		resp := getParametersResponse{Parameters: []jsonParameter{}, InvalidParameters: []string{}}
		for _, name := range req.Names {
			if p, ok := s.parameters[name]; ok {
				resp.Parameters = append(resp.Parameters, s.toJSONParameter(p))
			} else {
				resp.InvalidParameters = append(resp.InvalidParameters, name)
			}
		}
		sort.Slice(resp.Parameters, func(i, j int) bool { return resp.Parameters[i].Name < resp.Parameters[j].Name })
		return resp, nil
	default:
		return nil, newAPIError("UnknownOperationException", "The operation AmazonSSM.%s is not served by the local endpoint.", operation)
	}
}

// toJSONParameter describes a parameter the way SSM does.
func (s *Server) toJSONParameter(p *parameter) jsonParameter {
	return jsonParameter{
		ARN:              "arn:aws:ssm:" + s.region + "::parameter" + p.name,
		DataType:         p.dataType,
		LastModifiedDate: float64(p.modified.UnixMilli()) / 1000,
		Name:             p.name,
		Type:             "String",
		Value:            p.value,
		Version:          1,
	}
}
